/*
** clock.h -- the library's one clock, px_now(): CLOCK_MONOTONIC in nanoseconds
** (clock.c), or a run's virtual time on that run's thread; and the conversion
** of its nanoseconds to the kernel's timespec.
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

/* The real clock, whatever px_now() reads on this thread. */
static inline int64_t px__clock_real(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * PX__CLOCK_NS_PER_SEC + ts.tv_nsec;
}

/* While a run on a virtual clock is under way on this thread (its scheduler
** sets it: px_sched_opts.clock), the time px_now() reads; NULL otherwise. */
extern _Thread_local const int64_t *px__clock_virtual;

#endif /* PX__BASE_CLOCK_H */
