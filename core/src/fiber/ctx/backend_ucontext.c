/* The portable backend: swapcontext.  Slow (a sigprocmask syscall per
 * switch) but correct anywhere POSIX ucontext exists.  A suspended context's
 * ucontext_t lives in its own px__ctx_swap frame; a new one's at the top of
 * its stack. */
#include <stdint.h>
#include <stdlib.h>
#include <ucontext.h>

#include "fiber/ctx/backend.h"

const char *px__ctx_backend(void)
{
    return "ucontext";
}

void px__ctx_swap(void **save, void *sp)
{
    ucontext_t self;
    *save = &self;
    if (swapcontext(&self, sp) != 0)
        abort();
}

/* sp is the ucontext_t in px__ctx_swap's frame; the stack pointer it saved
** is that frame's own, a few words below it at most (swapcontext's return
** address and alignment).  UC_BELOW bytes more cover it with room to spare:
** a copy of dead bytes below it is harmless. */
#define UC_BELOW 256

void *px__ctx_low(void *sp)
{
    return (char *)sp - UC_BELOW;
}

/* makecontext passes ints only: the context pointer travels in two halves. */
static void start(unsigned hi, unsigned lo)
{
    uintptr_t p = ((uintptr_t)hi << 16 << 16) | (uintptr_t)lo;
    px__ctx_entry((px__context *)p);
}

void px__ctx_prepare(px__context *c, void *stack_lo, size_t size)
{
    uintptr_t top = ((uintptr_t)stack_lo + size - sizeof(ucontext_t)) & ~(uintptr_t)63;
    ucontext_t *uc = (ucontext_t *)top;
    uintptr_t p = (uintptr_t)c;
    getcontext(uc);
    uc->uc_stack.ss_sp = stack_lo;
    uc->uc_stack.ss_size = top - (uintptr_t)stack_lo;
    uc->uc_link = NULL;
    makecontext(uc, (void (*)(void))start, 2, (unsigned)(p >> 16 >> 16), (unsigned)p);
    c->sp = uc;
}
