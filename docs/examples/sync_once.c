/*
** sync_once.c -- initialise on first use: three fibers need a connection,
** the first one to ask makes it, the others park until it is made, and
** nobody makes it twice.  Read the shared value afterwards; only the fiber
** that ran the action gets the action's result from px_once_do.
**
**   cc sync_once.c -lparataxis && ./a.out
*/
#include <stdio.h>

#include "parataxis.h"

int sync_once_example(void);

typedef struct conn { int serial; } conn;

static px_once *once;
static conn the_conn, *db;          /* db is set by the action, once */
static int connects;

static int connect_db(void *arg)
{
    (void)arg;
    connects++;
    px_sleep(PX_MSEC(1));           /* a slow handshake: the others arrive */
    the_conn.serial = 42;
    db = &the_conn;
    return 0;                       /* a failure would be kept, not retried */
}

static void *run_query(void *arg)
{
    px_once_do(once, connect_db, NULL);
    printf("%s -> %s\n", (const char *)arg, db ? "connected" : "never initialised");
    return NULL;
}

static void *once_main(void *arg)
{
    (void)arg;
    const char *q[3] = { "select 1", "select 2", "select 3" };
    px_fiber *f[3];
    for (int i = 0; i < 3; i++)
        f[i] = px_spawn(run_query, (void *)q[i]);
    for (int i = 0; i < 3; i++) {
        px_join(f[i], NULL);
        px_fiber_release(f[i]);
    }
    printf("connected %d time(s)\n", connects);
    return NULL;
}

int sync_once_example(void)
{
    once = px_once_new();
    int r = px_run(once_main, NULL, NULL);
    px_once_free(once);
    return r == 0 && connects == 1 && db && db->serial == 42 ? 0 : 1;
}

#ifndef SYNC_EXAMPLE_NO_MAIN
int main(void) { return sync_once_example(); }
#endif
