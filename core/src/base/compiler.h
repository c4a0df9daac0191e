/*
** compiler.h -- the hints the library's hot paths give the compiler, where
** it understands them; elsewhere they mean nothing and the code is the same C.
*/
#ifndef PX__BASE_COMPILER_H
#define PX__BASE_COMPILER_H

#if defined(__GNUC__) || defined(__clang__)
#define PX__LIKELY(c)         __builtin_expect(!!(c), 1)  /* lay the true branch out first */
#define PX__NOINLINE          __attribute__((noinline))   /* keep a slow path out of line */
#define PX__PREFETCH_WRITE(p) __builtin_prefetch((p), 1)  /* start fetching a line we will write */
#else
#define PX__LIKELY(c)         (c)
#define PX__NOINLINE
#define PX__PREFETCH_WRITE(p) ((void)(p))
#endif

#endif /* PX__BASE_COMPILER_H */
