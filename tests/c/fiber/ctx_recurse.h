/* Recursion that really uses stack: each frame holds a buffer the
 * optimizer cannot drop, and the call is not a tail call. */
#ifndef CTX_RECURSE_H
#define CTX_RECURSE_H
#include <stdint.h>

static long recurse_until(uintptr_t stop);
/* Called through a volatile pointer so that the compiler cannot merge
 * levels into one big frame whose unwritten parts would skip a canary. */
static long (*volatile recurse_next)(uintptr_t) = recurse_until;

/* Recurse until a frame lies below stop (0: forever); returns the depth. */
static long recurse_until(uintptr_t stop)
{
    volatile char buf[256];
    for (int i = 0; i < 256; i++) /* every byte: a canary cannot be skipped */
        buf[i] = (char)(i & 1);
    if (stop && (uintptr_t)buf < stop)
        return buf[1];
    return recurse_next(stop) + buf[1];
}
#endif
