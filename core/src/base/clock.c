/* clock.c -- the one clock: CLOCK_MONOTONIC in nanoseconds, or the virtual time
** of the run on this thread (see clock.h). */
#include <time.h>

#include "parataxis.h"
#include "base/clock.h"

_Thread_local const int64_t *px__clock_virtual;

int64_t px_now(void)
{
    const int64_t *v = px__clock_virtual;
    return v ? *v : px__clock_real();
}
