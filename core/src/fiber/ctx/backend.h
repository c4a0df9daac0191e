/* Private to the context_*.c files: what a backend provides. */
#ifndef PX__FIBER_CTX_BACKEND_H
#define PX__FIBER_CTX_BACKEND_H

#include "fiber/ctx/context.h"

/* Save the running context's resume point into *save, resume sp. */
void px__ctx_swap(void **save, void *sp);
/* Lay out c->sp so that the first swap to it calls px__ctx_start(), then
** entry(arg).  entry and arg travel in the first frame's callee-saved
** registers, not in the context: a context is in every fiber record. */
void px__ctx_prepare(px__context *c, void *stack_lo, size_t size, void (*entry)(void *arg),
                     void *arg);
/* The lowest stack address a context suspended at `sp` (what px__ctx_swap
** saved) may still read when resumed: what a copy of its stack must keep. */
void *px__ctx_low(void *sp);
/* The top of what a context that px__ctx_prepare made on [stack_lo,
** stack_lo + size) reads or writes once it ran: above it lies only a part of
** its first frame that no context ever changes or needs again (the same for
** every context made on that stack), which a copy of its stack may leave out. */
void *px__ctx_top(void *stack_lo, size_t size);
/* Runs first on a new stack, before its entry: the sanitizers' side of the
** first switch. */
void px__ctx_start(void);

#endif
