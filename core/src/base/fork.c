/* fork.c -- the fork generation; see fork.h. */
#include <pthread.h>
#include <stdatomic.h>

#include "base/fork.h"

atomic_uint px__fork_gen;
static pthread_once_t watching = PTHREAD_ONCE_INIT;

static void in_child(void)
{
    atomic_fetch_add(&px__fork_gen, 1);
}

static void watch(void)
{
    pthread_atfork(NULL, NULL, in_child);
}

void px__fork_watch(void)
{
    pthread_once(&watching, watch);
}
