/*
** pxlua_sigint.h -- Ctrl-C (SIGINT) during px.run (pxlua_sigint.c), for
** pxlua_fiber.c: the run takes the signal for as long as it runs, ends every
** fiber and comes out as the interpreter's "interrupted!" error.
*/
#ifndef PXLUA_SIGINT_H
#define PXLUA_SIGINT_H

#include <signal.h>

#include <lua.h>

#include "parataxis.h"

/* At the start of the run of s on L's thread: when SIGINT has a handler (the
** lua5.4 interpreter's while it runs a chunk), puts ours in front of it, which
** records the signal, stops the fiber running then and wakes the run
** (px_sched_wake), then calls that handler.  Returns 1 when it did (end with pxlua_sigint_end); 0
** when SIGINT keeps its default action or is ignored, or another thread's run
** has it. */
int pxlua_sigint_begin(lua_State *L, px_sched *s);

/* At the end of a run that began with 1: gives SIGINT back to the handler
** it had (unless that handler replaced ours meanwhile, as lua5.4's does to
** let a second Ctrl-C end the process), and takes off the hook that handler
** set on the run's thread or the state's main thread (its own "interrupted!"
** would follow ours).  Returns 1 when a SIGINT came during the run. */
int pxlua_sigint_end(void);

/* Once the run acts on a SIGINT that came (pxlua_sigint_came set), on its
** thread, never from a signal handler: takes off the hook the interpreter's
** handler set on the run's thread or the state's main thread, before the
** fibers unwind -- the run calls Lua there (a timer handler's fiber starts),
** and a coroutine made there takes that thread's hook.  The handler's other
** change stays: a second Ctrl-C still ends the process.  Again after a later
** signal; nothing when none came. */
void pxlua_sigint_disarm(void);

/* For the run that began with 1 only, on its thread (plain variables: they
** are read around every resume).  pxlua_sigint_came: nonzero once a SIGINT
** came during the run.  pxlua_sigint_running: set to each fiber's coroutine
** while it is resumed, NULL between: the fiber a SIGINT stops where it is
** (a hook raises "interrupted!" in it, for one that never waits).  Once the
** resume returned and pxlua_sigint_running is NULL again, with
** pxlua_sigint_came set, pxlua_sigint_unhook(co) takes that hook off (before
** the coroutine goes to the pool). */
extern volatile sig_atomic_t pxlua_sigint_came;
extern lua_State *volatile pxlua_sigint_running;
void pxlua_sigint_unhook(lua_State *co);

/* From the on_wait hook (px_sched_opts.on_wait) of the run that began with
** 1: once a SIGINT came, posts interrupt(ctx) to s, once: the run wakes and
** runs it as a fiber. */
void pxlua_sigint_on_wait(px_sched *s, px_fiber_fn interrupt, void *ctx);

#endif
