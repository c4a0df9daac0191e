/*
** bits.h -- bit scans.  The wheel needs the highest and lowest set bit of a word;
** compilers that know how get one instruction, others a loop.
*/
#ifndef PX__BASE_BITS_H
#define PX__BASE_BITS_H

#include <stdint.h>

/* Index of the highest set bit of x, which is not 0. */
static inline int px__bits_high(uint64_t x)
{
#if defined(__GNUC__) || defined(__clang__)
    return 63 - __builtin_clzll(x);
#else
    int i = 0;
    while (x >>= 1)
        i++;
    return i;
#endif
}

/* Index of the lowest set bit of x, which is not 0. */
static inline int px__bits_low(uint64_t x)
{
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_ctzll(x);
#else
    int i = 0;
    while (!(x & 1)) {
        x >>= 1;
        i++;
    }
    return i;
#endif
}

#endif /* PX__BASE_BITS_H */
