/*
** trace.c -- the PARATAXIS_TRACE log.  Each line is formatted whole and written
** with one write(2), so lines of schedulers on different threads never mix.
*/
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "parataxis.h"
#include "base/clock.h"
#include "base/trace.h"

int px__trace_on;
static int64_t trace_t0;
static pthread_once_t trace_once = PTHREAD_ONCE_INIT;

static void trace_read_env(void)
{
    const char *v = getenv("PARATAXIS_TRACE");
    px__trace_on = v != NULL && *v != '\0' && strcmp(v, "0") != 0;
    trace_t0 = px_now();
}

void px__trace_init(void)
{
    pthread_once(&trace_once, trace_read_env);
}

void px__trace(uint64_t number, const char *name, const char *event, const char *detail)
{
    char line[256];
    int64_t t = px_now() - trace_t0;
    int n = snprintf(line, sizeof line, "parataxis trace %lld.%06lld fiber %llu%s%s%s %s%s%s%s\n",
                     (long long)(t / PX__CLOCK_NS_PER_SEC),
                     (long long)(t % PX__CLOCK_NS_PER_SEC / 1000),
                     (unsigned long long)number, name ? " \"" : "", name ? name : "",
                     name ? "\"" : "", event,
                     detail ? " \"" : "", detail ? detail : "", detail ? "\"" : "");
    if (n < 0)
        return;
    if ((size_t)n >= sizeof line) {
        n = sizeof line - 1;
        line[n - 1] = '\n';
    }
    ssize_t w = write(2, line, (size_t)n);
    (void)w;
}
