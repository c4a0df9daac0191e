/*
** fibers_observe.c -- seeing into a run: named fibers and objects, a dump of
** what each fiber waits for, a fiber-local request id that spawned fibers
** inherit, and a day of retries tested in no time on a virtual clock.
**
** Build:  cc fibers_observe.c $(pkg-config --cflags --libs parataxis)
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parataxis.h"

/* -- a request id every fiber of a request carries ------------------------- */

static px_local *request_id;   /* a heap copy of the id, per fiber */

static void *copy_id(void *v)
{
    return strdup(v);   /* each fiber owns its copy: destroy frees it */
}

static void log_line(const char *what)
{
    const char *id = px_local_get(request_id);
    printf("[%s] fiber %llu: %s\n", id ? id : "-",
           (unsigned long long)px_fiber_number(px_self()), what);
}

/* -- a dump while fibers wait ---------------------------------------------- */

static px_mutex *cache;
static px_event *done;

static void *refresher(void *arg)
{
    (void)arg;
    px_mutex_lock(cache);
    log_line("refreshing the cache");
    px_event_wait(done);   /* holds the cache until told */
    px_mutex_unlock(cache);
    return NULL;
}

static void *reader(void *arg)
{
    (void)arg;
    log_line("reading the cache");
    px_mutex_lock(cache);
    px_mutex_unlock(cache);
    return NULL;
}

static void *request(void *arg)
{
    (void)arg;
    px_fiber_set_name(0, "request");
    px_local_set(request_id, strdup("req-42"));
    px_fiber *r = px_spawn(refresher, NULL), *q = px_spawn(reader, NULL);
    px_fiber_set_name(px_fiber_id(r), "refresher");
    px_fiber_set_name(px_fiber_id(q), "reader");
    px_sleep(PX_MSEC(1));   /* both get as far as they can */
    px_dump(NULL, stdout);  /* the reader waits on "cache", held by the refresher */
    px_event_set(done);
    px_join(r, NULL);
    px_join(q, NULL);
    px_fiber_release(r);
    px_fiber_release(q);
    return NULL;
}

/* -- retries with back-off, a day of them, on a virtual clock -------------- */

static void *retry_for_a_day(void *arg)
{
    (void)arg;
    int64_t start = px_now(), wait = PX_SEC(1);
    int attempts = 0;
    while (px_now() - start < PX_SEC(24 * 3600)) {
        attempts++;   /* an attempt that fails, then back off, at most an hour */
        px_sleep(wait);
        wait = wait * 2 > PX_SEC(3600) ? PX_SEC(3600) : wait * 2;
    }
    printf("%d attempts in %.1f virtual hours\n", attempts,
           (double)(px_now() - start) / 3.6e12);
    return NULL;
}

int main(void)
{
    request_id = px_local_new(free, copy_id);
    cache = px_mutex_new();
    done = px_event_new();
    if (!request_id || !cache || !done)
        return 1;
    px_object_set_name(cache, "cache");
    if (px_run(request, NULL, NULL) != 0)
        return 1;

    int64_t t0 = px_now();
    px_sched_opts virtual_clock = { .clock = PX_CLOCK_VIRTUAL };
    if (px_run_with(&virtual_clock, retry_for_a_day, NULL, NULL) != 0)
        return 1;
    printf("real time: %s than a second\n", px_now() - t0 < PX_SEC(1) ? "less" : "more");

    px_event_free(done);
    px_mutex_free(cache);
    px_local_free(request_id);
    return 0;
}
