/* Execution contexts: the lowest layer of the fiber engine.
 *
 * A px__context is a suspended flow of control (its saved stack pointer) plus
 * the bookkeeping the sanitizers need to follow a switch between stacks.  The
 * layout is the same for every backend: the asm backend keeps the saved stack
 * pointer in sp; the ucontext backend keeps there the address of the
 * ucontext_t of the suspended context (held in that context's own frame), so
 * no context carries a kilobyte of ucontext_t it rarely needs. */
#ifndef PX__FIBER_CTX_CONTEXT_H
#define PX__FIBER_CTX_CONTEXT_H

#include <stddef.h>

/* Which sanitizer follows the switches: its fields exist only in its builds
** (a context is in every fiber record, and a million records add up). */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PX__CONTEXT_ASAN 1
#endif
#if __has_feature(thread_sanitizer)
#define PX__CONTEXT_TSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(PX__CONTEXT_ASAN)
#define PX__CONTEXT_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__) && !defined(PX__CONTEXT_TSAN)
#define PX__CONTEXT_TSAN 1
#endif

typedef struct px__context px__context;
struct px__context {
    void *sp;                 /* backend: saved stack pointer / ucontext_t * */
#ifdef PX__CONTEXT_ASAN
    const void *stack_lo; /* stack bounds, for ASan (thread: learnt lazily) */
    size_t stack_size;
    void *asan_fake;  /* ASan fake stack saved while suspended */
#endif
#ifdef PX__CONTEXT_TSAN
    void *tsan_fiber; /* TSan fiber handle */
    int tsan_owned;   /* created by us, so destroyed by us */
#endif
};

/* The calling thread's own context, to switch back to. */
void px__context_init_thread(px__context *c);
/* A new context that will run entry(arg), which must not return, on
 * [stack_lo, stack_lo + size).
 * 0 or PX_ENOMEM. */
int px__context_make(px__context *c, void *stack_lo, size_t size, void (*entry)(void *arg),
                     void *arg);
/* Save the running context into from and resume to. */
void px__context_switch(px__context *from, px__context *to);
/* The last switch out of a finished context: it is never resumed. */
void px__context_switch_final(px__context *from, px__context *to);
/* Release sanitizer state; the context must not be running. */
void px__context_destroy(px__context *c);

/*
** Stacks shared by several contexts, one resident at a time (the fiber
** engine's shared stacks): the bytes of a suspended context made on [stack_lo,
** stack_lo + size) run from px__context_low(c, stack_lo) up to
** px__context_top(stack_lo, size) (above it: a part of the first frame that
** is the same for every context made there and never changes).
** px__context_stack_out copies n bytes from lo to buf; px__context_stack_in
** copies n bytes from buf to `at`, on the stack [stack_lo, stack_lo + size).
** Both run on another stack than the one they copy, and tell ASan that its
** bytes are no frames' redzones any more: that shadow state belongs to frames
** that left (of another context, or saved).
*/
void *px__context_low(const px__context *c, const void *stack_lo);
void *px__context_top(void *stack_lo, size_t size);
void px__context_stack_out(void *buf, const void *lo, size_t n);
void px__context_stack_in(void *stack_lo, size_t size, void *at, const void *buf, size_t n);

/* Backend name, "asm" or "ucontext" (for benchmarks and tests). */
const char *px__ctx_backend(void);

#endif
