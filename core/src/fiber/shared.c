/*
** shared.c -- fibers on shared stacks (px_sched_opts.shared_stacks): many
** fibers run in turn on one stack, and a parked fiber costs its record and
** the bytes of stack it uses, not a page of its own.
**
** A shared stack holds the bytes of one fiber at a time, its resident.  When the
** scheduler is about to switch to a fiber of that stack that is not its
** resident, it copies the resident's bytes -- from its saved stack pointer up
** to the top of what a fiber uses -- into the resident's record (f->away), then
** copies the incoming fiber's bytes back to the same addresses, and only then
** switches.  The copies run on the scheduler's stack, never on the shared one:
** the engine switches between a fiber and its scheduler only, never from a
** fiber to another.  A fiber's bytes always go back to the addresses they came
** from, so pointers into its own stack are right whenever it runs; while it
** waits they point at another fiber's bytes (the rule parataxis.h states).
**
** A fiber is placed on a stack at spawn, round robin, and stays there.  Its
** first frame is laid out at its first turn, when the stack is its own.
** A saved copy is never larger than the stack: a fiber that ran below its
** stack's lowest byte met the guard, and the overflow report, first.
**
** No switch allocates.  Each time a fiber leaves its stack (parks, yields),
** the scheduler, back on its own stack, makes the fiber's buffer fit the bytes
** it left there (px__shared_keep) -- measured from the stack pointer the
** switch saved, so the size is exact, whatever frames the switch made -- and
** while they are still there: no other fiber ran yet.  The bytes do not
** change until the fiber runs again, so the copy made when it is evicted
** later always fits.  When that memory cannot be had, the fiber is resumed at
** once (its bytes never left) and what it called returns PX_ENOMEM
** (px__fiber_refuse).
*/
#include <stdlib.h>

#include "base/compiler.h"
#include "fiber/fiber.h"

/* What a saved copy's buffer is had from: realloc, or a test's stand-in that
** fails on demand (tests/c/fiber/fib_shared.c). */
void *(*px__shared_realloc)(void *p, size_t n) = realloc;

int px__shared_place(px_sched *s, px_fiber *f)
{
    px__shstack *sh = &s->shared[s->shared_next];
    if (sh->stack.lo == NULL) {
        if (px__stack_get_shared(s->pool, &sh->stack) != 0)
            return PX_ENOMEM;
        sh->top = px__context_top(sh->stack.lo, sh->stack.size);
    }
    s->shared_next = (s->shared_next + 1) % s->opts.shared_stacks;
    f->sh = sh;
    f->away.saved = NULL;
    f->away.len = f->away.cap = 0;
    return 0;
}

int px__shared_keep(px_fiber *f)
{
    px__shstack *sh = f->sh;
    size_t len = (size_t)(sh->top - (char *)px__context_low(&f->ctx, sh->stack.lo));
    /* The buffer keeps its size across turns (no allocation per switch), and
    ** shrinks when it is more than twice what it must hold, so a fiber that
    ** once ran deep does not keep that much while it waits shallow.  A shrink
    ** that fails keeps the bigger buffer, which fits as well. */
    if (!PX__LIKELY(len <= f->away.cap && len >= f->away.cap / 2)) {
        void *p = px__shared_realloc(f->away.saved, len);
        if (p == NULL && len > f->away.cap)
            return PX_ENOMEM;
        if (p != NULL) {
            f->away.saved = p;
            f->away.cap = len;
        }
    }
    f->away.len = len;   /* what save copies, if it is evicted before it runs */
    return 0;
}

/* Copies resident r's bytes into its buffer, which px__shared_keep made fit
** (and measured) when r left the stack. */
static void save(px__shstack *sh, px_fiber *r)
{
    px__context_stack_out(r->away.saved, sh->top - r->away.len, r->away.len);
}

const px__stack *px__shared_enter(px_fiber *f)
{
    px__shstack *sh = f->sh;
    px_fiber *r = sh->resident;
    if (r == f)
        return &sh->stack;
    if (r != NULL)
        save(sh, r);
    sh->resident = f;
    if (f->ctx.sp == NULL)   /* its first turn */
        px__context_make(&f->ctx, sh->stack.lo, sh->stack.size, px__fiber_main, f);
    else
        px__context_stack_in(sh->stack.lo, sh->stack.size, sh->top - f->away.len,
                             f->away.saved, f->away.len);
    return &sh->stack;
}

void px__shared_release(px_fiber *f)
{
    if (f->sh->resident == f)
        f->sh->resident = NULL;
    free(f->away.saved);
    f->away.saved = NULL;
    f->away.len = f->away.cap = 0;
}

void px__shared_free(px_sched *s)
{
    for (size_t i = 0; s->shared && i < s->opts.shared_stacks; i++)
        if (s->shared[i].stack.lo != NULL)
            px__stack_put(s->pool, &s->shared[i].stack);
    free(s->shared);
    s->shared = NULL;
}
