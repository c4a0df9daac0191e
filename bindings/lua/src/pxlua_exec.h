/*
** pxlua_exec.h -- px.scheduler(): the run under way as the executor of a timer
** queue (pxlua_exec.c), between the three C parts of the Lua module: the
** fibers (pxlua_fiber.c), the executor, and the SWIG side's TimerQueue
** (pxswig.c).  No Lua header is needed to include it.
*/
#ifndef PXLUA_EXEC_H
#define PXLUA_EXEC_H

#include "parataxis.h"
#include "pxhost.h"

struct lua_State;
struct TimerQueue;

/* -- for pxswig.c and the SWIG wrapper ------------------------------------ */

/* The executor of the Scheduler (px.scheduler()) at index idx, borrowed; raises
** a Lua error (EINVAL) for anything else.  A queue that uses it takes a
** reference (pxhost_exec_ref) for as long as it may post. */
pxhost_exec *pxlua_exec_arg(struct lua_State *L, int idx);

/* Hands the call fn(arg, status) of queue t to x's run, to start as a fiber
** there: 0, PX_ECLOSED once the run is over, PX_ENOMEM (nothing is kept on an
** error).  Thread: any (the queue's worker). */
int pxlua_exec_post(pxhost_exec *x, struct TimerQueue *t, px_handler_fn fn, void *arg,
                    int status);

/* -- for pxlua_fiber.c ------------------------------------------------------ */

/* The run was cancelled (main failed, a deadlock is unwound): it lets go of
** every hold, and takes no more. */
void pxlua_exec_cancelled(void);

/* At the end of a run, before its scheduler is freed: closes its executor and
** returns 1, or returns 0 while calls posted to it have not started (run the
** scheduler again) unless `force`. */
int pxlua_exec_close(struct lua_State *L, int force);

/* Adds scheduler, set_dispatch, wake (a test hook) and the Scheduler methods
** to the table on top. */
void pxlua_exec_open(struct lua_State *L);

/* -- from pxlua_fiber.c, for pxlua_exec.c ------------------------------------ */

/* The Lua thread and the scheduler of the run under way here (NULL outside). */
struct lua_State *pxlua_run_state(void);
px_sched *pxlua_run_sched(void);

/* Replaces fn and its arguments at base..top of L by a new fiber of the run
** (its userdata); 0, or PX_ENOMEM / PX_ENOFIBER. */
int pxlua_spawn(struct lua_State *L, int base);

/* Before the run calls Lua on its thread outside a fiber: a Ctrl-C that came
** and was not acted on yet is now (the run is cancelled and the interpreter's
** hook, which would raise in that call, is taken off: pxlua_sigint.h). */
void pxlua_run_see_sigint(void);

#endif
