/*
** host_graves.c -- a busy object the collector reached is neither freed under
** the fibers that hold it nor leaked: pxhost_collect keeps it, pxhost_sweep
** frees it once it is not busy, and keeps it while it is.  (ASan's leak check
** and the counting free below say which.)
*/
#include "../check.h"
#include "pxhost.h"

static int freed;

static int counting_mutex_free(void *p)
{
    int rc = px_mutex_free(p);
    freed += rc == 0;
    return rc;
}

static int counting_token_free(void *p)
{
    px_token_free(p);
    freed++;
    return 0;
}

static px_mutex *m;

static void *holder(void *arg)
{
    (void)arg;
    CHECK_EQ(px_mutex_lock(m), 0);
    pxhost_collect(counting_mutex_free, m, 0);   /* busy: kept, not freed */
    CHECK_EQ(freed, 0);
    CHECK_EQ(pxhost_sweep(), 1);                 /* still held: still kept */
    CHECK_EQ(freed, 0);
    CHECK_EQ(px_mutex_unlock(m), 0);
    return NULL;
}

int main(void)
{
    CHECK_EQ(pxhost_sweep(), 0);                 /* nothing kept */

    /* not busy: freed at once */
    pxhost_collect(counting_mutex_free, px_mutex_new(), 0);
    CHECK_EQ(freed, 1);

    /* busy while a fiber holds it: freed by the sweep after the run */
    freed = 0;
    m = px_mutex_new();
    CHECK(m != NULL);
    CHECK_EQ(px_run(holder, NULL, NULL), 0);
    CHECK_EQ(freed, 0);
    CHECK_EQ(pxhost_sweep(), 0);
    CHECK_EQ(freed, 1);

    /* `later`: kept without a try (a token a scope may use), freed by the sweep */
    freed = 0;
    pxhost_collect(counting_token_free, px_token_new(), 1);
    CHECK_EQ(freed, 0);
    CHECK_EQ(pxhost_sweep(), 0);
    CHECK_EQ(freed, 1);

    pxhost_collect(counting_token_free, NULL, 0);   /* NULL: nothing */
    CHECK_EQ(freed, 1);
    puts("host.graves: ok");
    return 0;
}
