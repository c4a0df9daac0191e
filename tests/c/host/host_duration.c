/*
** host_duration.c -- the bindings' one seconds -> nanoseconds rule is the C
** API's: negative and NaN are refused, what int64_t nanoseconds cannot hold
** (2^63 ns or more, inf) saturates to INT64_MAX ("never"), the rest truncates.
*/
#include <math.h>

#include "../check.h"
#include "pxhost.h"

static int64_t ns_of(double s)
{
    int64_t ns = 12345;
    CHECK_EQ(pxhost_ns(s, &ns), 0);
    return ns;
}

static void refused(double s)
{
    int64_t ns = 12345;
    CHECK_EQ(pxhost_ns(s, &ns), PX_EINVAL);
    CHECK_EQ(ns, 12345);                     /* untouched */
}

int main(void)
{
    CHECK_EQ(ns_of(0), 0);
    CHECK_EQ(ns_of(-0.0), 0);
    CHECK_EQ(ns_of(1.5), 1500000000);
    CHECK_EQ(ns_of(1e-9), 1);
    CHECK_EQ(ns_of(0.4e-9), 0);              /* truncated, as C casts */
    refused(-1e-12);
    refused(-INFINITY);
    refused(NAN);
    /* the last float below 2^63 ns converts; from 2^63 ns on it is "never" */
    double edge = 0x1p63 / 1e9;
    while (edge * 1e9 >= 0x1p63)
        edge = nextafter(edge, 0);
    CHECK(ns_of(edge) < INT64_MAX);
    CHECK(ns_of(edge) > INT64_MAX - 2048);
    CHECK_EQ(ns_of(nextafter(edge, INFINITY)), INT64_MAX);
    CHECK_EQ(ns_of(1e300), INT64_MAX);
    CHECK_EQ(ns_of(INFINITY), INT64_MAX);
    puts("host.duration: ok");
    return 0;
}
