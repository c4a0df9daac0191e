/* The backend-independent half of a context switch: sanitizer bookkeeping
 * around the backend's raw swap (backend_asm.c + .S, or backend_ucontext.c). */
#include <stdlib.h>
#include <string.h>

#include "parataxis.h"
#include "fiber/ctx/context.h"
#include "fiber/ctx/backend.h"

#ifdef PX__CONTEXT_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
/* The context that switched last on this thread: the resumed side learns
 * from ASan the bounds of the stack it came from and stores them there. */
static _Thread_local px__context *asan_from;

static void asan_start(px__context *from, px__context *to, int final)
{
    asan_from = from;
    __sanitizer_start_switch_fiber(final ? NULL : &from->asan_fake, to->stack_lo, to->stack_size);
}

static void asan_finish(void *fake)
{
    px__context *from = asan_from;
    const void *lo;
    size_t size;
    __sanitizer_finish_switch_fiber(fake, &lo, &size);
    if (from && !from->stack_lo) { /* a thread context: bounds learnt here */
        from->stack_lo = lo;
        from->stack_size = size;
    }
}
#else
#define asan_start(from, to, final) ((void)0)
#define asan_finish(fake)           ((void)0)
#endif

#ifdef PX__CONTEXT_TSAN
#include <sanitizer/tsan_interface.h>
/* TSan counts fibers as threads (about 8,000 live at most), so a context's
 * TSan fiber exists only from its first run to its final switch; the side
 * resumed by a final switch destroys the finished one. */
static _Thread_local px__context *tsan_dead;

static void tsan_to(px__context *to, px__context *dying)
{
    if (!to->tsan_fiber && !(to->tsan_fiber = __tsan_create_fiber(0)))
        abort(); /* no way to report PX_ENOMEM from a switch */
    tsan_dead = dying;
    __tsan_switch_to_fiber(to->tsan_fiber, 0);
}

static void tsan_reap(void)
{
    if (tsan_dead) {
        __tsan_destroy_fiber(tsan_dead->tsan_fiber);
        tsan_dead->tsan_fiber = NULL;
        tsan_dead = NULL;
    }
}
#else
#define tsan_to(to, dying) ((void)0)
#define tsan_reap()        ((void)0)
#endif

void px__ctx_start(void)
{
    asan_finish(NULL);
    tsan_reap();
}

void px__context_init_thread(px__context *c)
{
    c->sp = NULL;
#ifdef PX__CONTEXT_ASAN
    c->stack_lo = NULL;
    c->stack_size = 0;
    c->asan_fake = NULL;
#endif
#ifdef PX__CONTEXT_TSAN
    c->tsan_fiber = __tsan_get_current_fiber();
    c->tsan_owned = 0;
#endif
}

int px__context_make(px__context *c, void *stack_lo, size_t size, void (*entry)(void *arg),
                     void *arg)
{
    px__context_init_thread(c);
#ifdef PX__CONTEXT_TSAN
    c->tsan_fiber = NULL; /* created at its first run */
    c->tsan_owned = 1;
#endif
#ifdef PX__CONTEXT_ASAN
    c->stack_lo = stack_lo;
    c->stack_size = size;
    /* A recycled stack keeps the redzones of the frames that last ran on it
   * (a fiber freed while parked never unwound them): clear them. */
    __asan_unpoison_memory_region(stack_lo, size);
#endif
    px__ctx_prepare(c, stack_lo, size, entry, arg);
    return 0;
}

void px__context_switch(px__context *from, px__context *to)
{
    asan_start(from, to, 0);
    tsan_to(to, NULL);
    px__ctx_swap(&from->sp, to->sp);
    asan_finish(from->asan_fake);
    tsan_reap();
}

void px__context_switch_final(px__context *from, px__context *to)
{
    asan_start(from, to, 1);
    tsan_to(to, from->tsan_owned ? from : NULL);
    px__ctx_swap(&from->sp, to->sp);
    abort(); /* a finished context is never resumed */
}

void px__context_destroy(px__context *c)
{
#ifdef PX__CONTEXT_TSAN
    if (c->tsan_owned && c->tsan_fiber)
        __tsan_destroy_fiber(c->tsan_fiber);
    c->tsan_fiber = NULL;
    c->tsan_owned = 0;
#else
    (void)c;
#endif
}

void *px__context_top(void *stack_lo, size_t size)
{
    return px__ctx_top(stack_lo, size);
}

void *px__context_low(const px__context *c, const void *stack_lo)
{
    char *low = px__ctx_low(c->sp);
    return low < (const char *)stack_lo ? (void *)stack_lo : low;
}

/* The frames that wrote these bytes left their redzones poisoned, and a
** plain memcpy would read them as overflows: unpoison first (a no-op without
** ASan).  The copy goes through memcpy, which TSan sees as the scheduler's
** accesses, ordered after the switch that suspended the context. */
static void unpoison(const void *lo, size_t n)
{
#ifdef PX__CONTEXT_ASAN
    __asan_unpoison_memory_region(lo, n);
#else
    (void)lo;
    (void)n;
#endif
}

void px__context_stack_out(void *buf, const void *lo, size_t n)
{
    unpoison(lo, n);
    memcpy(buf, lo, n);
}

void px__context_stack_in(void *stack_lo, size_t size, void *at, const void *buf, size_t n)
{
    unpoison(stack_lo, size);
    memcpy(at, buf, n);
}
