/*
** fibers_group.c -- structured concurrency: a group that fetches three
** "pages" at once and fails as a whole when one fetch fails, a px_map over
** the same work, and a future that a thread settles.
**
**   cc -std=c11 -Icore/include docs/examples/fibers_group.c libparataxis.a -lpthread
**
** A fetch here is a sleep; page 2 of the second round fails, which cancels
** the fetches still sleeping: they return PX_ECANCELED, which is no failure.
*/
#include <pthread.h>
#include <stdio.h>

#include "parataxis.h"

static int fail_page = -1;

static int fetch(void *arg)
{
    int page = (int)(intptr_t)arg;
    if (page == fail_page)
        return 404;                        /* a failure: cancels the group */
    int r = px_sleep(PX_MSEC(20) * (page + 1));
    if (r == 0)
        printf("page %d fetched\n", page);
    return r;                              /* PX_ECANCELED once cancelled */
}

static int fetch_into(void *item, void **result)
{
    int r = fetch(item);
    *result = (void *)((intptr_t)item * 100);
    return r;
}

static void *settle_from_a_thread(void *arg)
{
    px_future_set_result(arg, (void *)42);
    return NULL;
}

static void *main_fiber(void *arg)
{
    (void)arg;
    for (int round = 0; round < 2; round++) {
        fail_page = round == 0 ? -1 : 2;
        px_group *g = px_group_new();
        for (intptr_t page = 0; page < 4; page++)
            px_group_spawn(g, fetch, (void *)page);
        int r = px_group_wait(g);          /* every member ended, whatever happened */
        int failures[4];
        size_t n = px_group_failures(g, failures, 4);
        printf("round %d: %d, %zu failure(s)\n", round, r, n);
        px_group_free(g);
    }

    void *items[] = { (void *)0, (void *)1, (void *)2 }, *results[3];
    fail_page = -1;
    if (px_map(fetch_into, items, results, 3, 2) == 0)   /* two at a time */
        printf("map: %d %d %d\n", (int)(intptr_t)results[0], (int)(intptr_t)results[1],
               (int)(intptr_t)results[2]);

    px_future *fu = px_future_new();
    pthread_t t;
    pthread_create(&t, NULL, settle_from_a_thread, fu);
    void *v;
    if (px_future_wait(fu, &v) == 0)
        printf("future: %d\n", (int)(intptr_t)v);
    pthread_join(t, NULL);
    px_future_free(fu);
    return NULL;
}

int main(void)
{
    return px_run(main_fiber, NULL, NULL) == 0 ? 0 : 1;
}
