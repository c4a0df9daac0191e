/* clock.c -- the one clock: CLOCK_MONOTONIC in nanoseconds (see clock.h). */
#include <time.h>

#include "parataxis.h"
#include "base/clock.h"

int64_t px_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * PX__CLOCK_NS_PER_SEC + ts.tv_nsec;
}
