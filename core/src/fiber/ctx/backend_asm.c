/* The C half of the asm backend: the first frame of a new context, laid out
 * exactly as px__ctx_swap (backend_<arch>.S) pops it. */
#include <stdint.h>
#include <string.h>

#include "fiber/ctx/backend.h"

void px__ctx_trampoline(void);
void px__ctx_fpctl(void *out8);

const char *px__ctx_backend(void)
{
    return "asm";
}

/* The saved registers sit at sp, and nothing below it is live: a suspended
** context made a call, so no red zone holds anything. */
void *px__ctx_low(void *sp)
{
    return sp;
}

#if defined(__x86_64__)
/* The trampoline starts with rsp 16 bytes below the top: above it, the zero
** return address that ends backtraces, and padding. */
void *px__ctx_top(void *stack_lo, size_t size)
{
    return (void *)((((uintptr_t)stack_lo + size) & ~(uintptr_t)15) - 16);
}
#else
/* AArch64: the trampoline starts with sp at the top, and its callee's frame
** record goes right below it: every byte is live. */
void *px__ctx_top(void *stack_lo, size_t size)
{
    return (void *)(((uintptr_t)stack_lo + size) & ~(uintptr_t)15);
}
#endif

void px__ctx_prepare(px__context *c, void *stack_lo, size_t size, void (*entry)(void *arg),
                     void *arg)
{
    uintptr_t top = ((uintptr_t)stack_lo + size) & ~(uintptr_t)15;
    uint64_t *f;
#if defined(__x86_64__)
    /* fpctl, r15, r14, r13 = arg, r12 = entry, rbx, rbp = 0, the resume
   * address (popped and jumped to) = trampoline, then a 0 return address;
   * rsp is 16-aligned when the trampoline runs. */
    f = (uint64_t *)(top - 16 - 64);
    memset(f, 0, 80);
    px__ctx_fpctl(&f[0]);
    f[3] = (uint64_t)(uintptr_t)arg;
    f[4] = (uint64_t)(uintptr_t)entry;
    f[7] = (uint64_t)(uintptr_t)px__ctx_trampoline;
#elif defined(__aarch64__)
    /* x19 = entry, x20 = arg ... x29 = 0, x30 = trampoline, d8-d15, fpcr. */
    f = (uint64_t *)(top - 176);
    memset(f, 0, 176);
    f[0] = (uint64_t)(uintptr_t)entry;
    f[1] = (uint64_t)(uintptr_t)arg;
    f[11] = (uint64_t)(uintptr_t)px__ctx_trampoline;
    px__ctx_fpctl(&f[20]);
#else
#error "no asm context backend for this architecture; use PARATAXIS_CONTEXT=ucontext"
#endif
    c->sp = f;
}
