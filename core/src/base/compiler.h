/*
** compiler.h -- the hints the library's hot paths give the compiler, where
** it understands them; elsewhere they mean nothing and the code is the same C.
*/
#ifndef PX_COMPILER_H
#define PX_COMPILER_H

#if defined(__GNUC__) || defined(__clang__)
#define PX_LIKELY(c) __builtin_expect(!!(c), 1)       /* lay the true branch out first */
#define PX_NOINLINE  __attribute__((noinline))        /* keep a slow path out of line */
#define PX_PREFETCH_WRITE(p) __builtin_prefetch((p), 1) /* start fetching a line we will write */
#else
#define PX_LIKELY(c) (c)
#define PX_NOINLINE
#define PX_PREFETCH_WRITE(p) ((void)(p))
#endif

#endif /* PX_COMPILER_H */
