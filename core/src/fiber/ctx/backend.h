/* Private to the context_*.c files: what a backend provides. */
#ifndef PX_CONTEXT_BACKEND_H
#define PX_CONTEXT_BACKEND_H

#include "fiber/ctx/context.h"

/* Save the running context's resume point into *save, resume sp. */
void px__ctx_swap(void **save, void *sp);
/* Lay out c->sp so that the first swap to it calls px__ctx_entry(c). */
void px__ctx_prepare(px__context *c, void *stack_lo, size_t size);
/* The lowest stack address a context suspended at `sp` (what px__ctx_swap
** saved) may still read when resumed: what a copy of its stack must keep. */
void *px__ctx_low(void *sp);
/* Runs first on a new stack; never returns. */
void px__ctx_entry(px__context *c);

#endif
