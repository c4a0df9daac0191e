/*
** clock.h -- the library's one clock, px_now(): CLOCK_MONOTONIC in nanoseconds
** (clock.c), and the conversion of its nanoseconds to the kernel's timespec.
*/
#ifndef PX__BASE_CLOCK_H
#define PX__BASE_CLOCK_H

#include <stdint.h>
#include <time.h>

#define PX__CLOCK_NS_PER_SEC ((int64_t)1000000000)

/* `ns`, which is not negative, as a timespec: an absolute one for a reading of
** px_now()'s clock (pthread_cond_timedwait on CLOCK_MONOTONIC), a relative one
** for a duration (ppoll). */
static inline struct timespec px__clock_timespec(int64_t ns)
{
    struct timespec ts = { .tv_sec = (time_t)(ns / PX__CLOCK_NS_PER_SEC),
                           .tv_nsec = (long)(ns % PX__CLOCK_NS_PER_SEC) };
    return ts;
}

#endif /* PX__BASE_CLOCK_H */
