/*
** fib_trace.c -- PARATAXIS_TRACE=1 logs spawn, park with its reason, wake,
** timeout, cancel and exit, each line with a timestamp and the fiber id.
** stderr goes to a file while the run lasts; the lines are then checked.
*/
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../check.h"

static uint64_t id_main, id_kid;

static int park_body(void *arg) { (void)arg; return px_park("traced park", NULL, NULL); }

static void *kid(void *arg)
{
    (void)arg;
    id_kid = px_self();
    CHECK_EQ(px_park("kid waits", NULL, NULL), 0);
    return NULL;
}

static void *main_fiber(void *arg)
{
    (void)arg;
    id_main = px_self();
    px_fiber *k = px_spawn(kid, NULL);
    CHECK_EQ(px_yield(), 0);
    CHECK_EQ(px_wake(id_kid), 1);
    CHECK_EQ(px_join(k, NULL), 0);
    px_fiber_release(k);
    CHECK_EQ(px_with_timeout(PX_MSEC(5), park_body, NULL), PX_ETIMEDOUT);
    px_token *t = px_token_new();
    CHECK_EQ(px_token_cancel(t), 1);
    CHECK_EQ(px_with_cancel(t, park_body, NULL), PX_ECANCELED);
    px_token_free(t);
    return NULL;
}

static char text[65536];

static int has(const char *event, uint64_t id)
{
    char needle[128];
    snprintf(needle, sizeof needle, " fiber %llu %s", (unsigned long long)px_fiber_number(id), event);
    return strstr(text, needle) != NULL;
}

int main(void)
{
    char path[] = "/tmp/px_fib_trace_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    unlink(path);
    int saved = dup(2);
    CHECK(dup2(fd, 2) == 2);
    CHECK(setenv("PARATAXIS_TRACE", "1", 1) == 0);   /* before the first scheduler */
    int r = px_run(main_fiber, NULL, NULL);
    fflush(stderr);
    dup2(saved, 2);
    CHECK_EQ(r, 0);
    CHECK(lseek(fd, 0, SEEK_SET) == 0);
    ssize_t n = read(fd, text, sizeof text - 1);
    CHECK(n > 0);
    text[n] = 0;
    fputs(text, stdout);
    CHECK(has("spawn", id_main));
    CHECK(has("spawn", id_kid));
    CHECK(has("park \"kid waits\"", id_kid));
    CHECK(has("wake \"kid waits\"", id_kid));
    CHECK(has("exit", id_kid));
    CHECK(has("park \"fiber join\"", id_main));
    CHECK(has("timeout \"traced park\"", id_main));
    CHECK(has("cancel \"traced park\"", id_main));
    CHECK(has("exit", id_main));
    /* Every line: "parataxis trace <s>.<us> fiber <number> <event>". */
    for (char *line = text; *line; line = strchr(line, '\n') + 1) {
        double ts;
        unsigned long long id;
        char ev[32];
        CHECK_EQ(sscanf(line, "parataxis trace %lf fiber %llu %31s", &ts, &id, ev), 3);
        CHECK(ts >= 0 && id != 0);
        if (!strchr(line, '\n'))
            break;
    }
    printf("fib_trace: ok\n");
    return 0;
}
