/* clock.c -- the one clock: CLOCK_MONOTONIC in nanoseconds. */
#include <time.h>

#include "parataxis.h"

int64_t px_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
