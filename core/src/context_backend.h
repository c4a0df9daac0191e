/* Private to the context_*.c files: what a backend provides. */
#ifndef PX_CONTEXT_BACKEND_H
#define PX_CONTEXT_BACKEND_H

#include "context.h"

/* Save the running context's resume point into *save, resume sp. */
void px_ctx_swap(void **save, void *sp);
/* Lay out c->sp so that the first swap to it calls px_ctx_entry(c). */
void px_ctx_prepare(px_context *c, void *stack_lo, size_t size);
/* Runs first on a new stack; never returns. */
void px_ctx_entry(px_context *c);

#endif
