/*
** deadline.h -- durations into deadlines, without overflow.
**
** Signed overflow is undefined behaviour, and a wrapped deadline would lie in
** the past: a huge timeout would fire at once.  So the one rule of the library,
** in one place: a deadline `ns` after `now` saturates at INT64_MAX, which every
** clock reading stays below for 292 years, so it means "never".  A negative
** duration is the caller's to refuse (or to take as "already due") before it
** gets here; the helpers are exact for any int64 arguments all the same (but
** px__deadline_next_tick, which takes clock readings).
**
** These are a compare and an add each, cheap enough for the add paths (but for
** the periodic tick, which divides once a tick).
*/
#ifndef PX__BASE_DEADLINE_H
#define PX__BASE_DEADLINE_H

#include <stdint.h>
#include <time.h>

#include "base/clock.h"

/* now + ns, saturating at INT64_MAX (and at INT64_MIN below). */
static inline int64_t px__deadline_after(int64_t now, int64_t ns)
{
    if (ns > 0 && now > INT64_MAX - ns)
        return INT64_MAX;
    if (ns < 0 && now < INT64_MIN - ns)
        return INT64_MIN;
    return now + ns;
}

/*
** The fiber engine's parks take INT64_MAX for "no deadline" (no node in the
** scheduler's set, and a sleep with it would pass for a plain park): a sleep or
** a scope that saturates keeps a deadline of its own, one nanosecond short of
** it, which is still never.
*/
static inline int64_t px__deadline_finite(int64_t deadline)
{
    return deadline == INT64_MAX ? INT64_MAX - 1 : deadline;
}

/* to - from, saturating likewise. */
static inline int64_t px__deadline_between(int64_t from, int64_t to)
{
    if (from < 0 && to > INT64_MAX + from)
        return INT64_MAX;
    if (from > 0 && to < INT64_MIN + from)
        return INT64_MIN;
    return to - from;
}

/* What is left from `now` to `deadline`, never negative, as a relative timespec
** for ppoll. */
static inline struct timespec px__deadline_timespec(int64_t deadline, int64_t now)
{
    return px__clock_timespec(deadline > now ? px__deadline_between(now, deadline) : 0);
}

/*
** The first tick of a period `period` (> 0) after `now`, in phase with
** `deadline`; both are clock readings, not negative.  Saturates likewise: a tick
** past INT64_MAX is never.
*/
static inline int64_t px__deadline_next_tick(int64_t deadline, int64_t period, int64_t now)
{
    int64_t missed = deadline < now ? (now - deadline) / period : 0;
    if (missed >= (INT64_MAX - deadline) / period)
        return INT64_MAX;
    return deadline + (missed + 1) * period;
}

/*
** A tolerance -- a timer slack, an abort linger -- says how late a wake-up may
** come, not when: past a second it is taken as a second, since "up to 292 years
** late" would leave a handler waiting for ever.
*/
#define PX__DEADLINE_TOLERANCE_MAX PX__CLOCK_NS_PER_SEC

static inline int64_t px__deadline_tolerance(int64_t ns)
{
    return ns > PX__DEADLINE_TOLERANCE_MAX ? PX__DEADLINE_TOLERANCE_MAX : ns;
}

#endif /* PX__BASE_DEADLINE_H */
