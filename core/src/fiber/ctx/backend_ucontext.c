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

/* makecontext passes ints only: entry and arg travel in two halves each. */
static uintptr_t join_halves(unsigned hi, unsigned lo)
{
    return ((uintptr_t)hi << 16 << 16) | (uintptr_t)lo;
}

static void start(unsigned entry_hi, unsigned entry_lo, unsigned arg_hi, unsigned arg_lo)
{
    void (*entry)(void *) = (void (*)(void *))join_halves(entry_hi, entry_lo);
    px__ctx_start();
    entry((void *)join_halves(arg_hi, arg_lo));
    abort(); /* entry must not return: nothing to return to */
}

/* Where px__ctx_prepare puts the first ucontext_t, at the top of the stack:
** makecontext runs the context below it, and only the first switch reads it. */
static uintptr_t first_uc(void *stack_lo, size_t size)
{
    return ((uintptr_t)stack_lo + size - sizeof(ucontext_t)) & ~(uintptr_t)63;
}

void *px__ctx_top(void *stack_lo, size_t size)
{
    return (void *)first_uc(stack_lo, size);
}

void px__ctx_prepare(px__context *c, void *stack_lo, size_t size, void (*entry)(void *arg),
                     void *arg)
{
    uintptr_t top = first_uc(stack_lo, size);
    ucontext_t *uc = (ucontext_t *)top;
    uintptr_t e = (uintptr_t)entry, a = (uintptr_t)arg;
    getcontext(uc);
    uc->uc_stack.ss_sp = stack_lo;
    uc->uc_stack.ss_size = top - (uintptr_t)stack_lo;
    uc->uc_link = NULL;
    makecontext(uc, (void (*)(void))start, 4, (unsigned)(e >> 16 >> 16), (unsigned)e,
                (unsigned)(a >> 16 >> 16), (unsigned)a);
    c->sp = uc;
}
