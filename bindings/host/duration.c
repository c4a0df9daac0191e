/*
** duration.c -- the bindings' one seconds-to-nanoseconds rule, the C API's
** (pxhost.h): a float of seconds that the C API's int64_t nanoseconds cannot
** hold is "never", not an error; only a negative or NaN one is refused.
*/
#include "pxhost.h"

int pxhost_ns(double s, int64_t *ns)
{
    double v = s * 1e9;
    if (!(v >= 0))             /* NaN too */
        return PX_EINVAL;
    *ns = v >= PXHOST_NS_NEVER ? INT64_MAX : (int64_t)v;
    return 0;
}
