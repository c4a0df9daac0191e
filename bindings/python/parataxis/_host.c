/*
** _host.c -- parataxis._host, the greenlet host of Python fibers.
**
** Each Python fiber is a pulled fiber of a C scheduler run on a greenlet: the
** scheduler decides whose turn it is (px_sched_next), the greenlets switch
** straight to one another.  A greenlet is a worker: once its fiber ended it
** runs the next new one, or waits idle in a bounded pool (see retire).  A
** fiber that would park gets PX_EYIELD from the C call, pulls the next turn
** and switches to it; once switched back, it collects the outcome.  So no C
** frame of the library is ever on a parked greenlet's stack (greenlet copies a
** parked greenlet's stack slice away and lets others use the space), and a
** yield is one C call and one switch.
**
** This is a CPython extension rather than cffi code because its calls must
** switch greenlets, which needs the GIL, and cffi releases the GIL around
** every C call: here the GIL is held except while the scheduler may wait in
** the kernel (px_sched_next).
**
** The state of a run lives in a thread-local record (a thread runs one
** scheduler at a time); the Python side (_fibers.py) makes the scheduler and
** gives it to begin().  The module's other files are _handles.c (the sync
** objects' handles, the waits) and _timers.c (the timer queues' side).
*/
#include "_host.h"
#include <greenlet.h>   /* greenlet's C API: from its package directory */
#include <frameobject.h>

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pxhost.h"     /* the run as an executor: bindings/host */

/*
** A pulled fiber's host_ctx.  Its job is the _fibers.Fiber whose _main() it
** runs: a fiber spawned from Python has it from the start, one that a handler
** or a post starts (on a C fiber, without the GIL) gets it from the run's
** factory at its first turn.  Its greenlet is bound at its first turn too: an
** idle worker's (see retire) or a new one.
*/
typedef struct hfiber {
    pxhost_call call;        /* first: a handler call to run in it (call.fn), until
                                its job starts; call.exec posted it (job NULL) */
    PyObject *glet;          /* a strong reference once bound */
    PyObject *cur;           /* the greenlet it parked in last, when not glet (see pass_turn) */
    PyObject *scope;         /* its innermost open Python scope (see scope_push) */
    PyObject *job;           /* the Fiber, until its greenlet takes it */
    PyObject *fiber;         /* the Fiber while its greenlet runs it (borrowed:
                                the worker holds it), for current_fiber() */
} hfiber;

/* Idle workers kept at most: a greenlet whose fiber ended waits (parked in
** retire, no fiber of the scheduler) to run the next new fiber, as a new
** greenlet costs ~10 us (CPython maps each one its own frame data stack). */
enum { POOL_MAX = 64 };

/* The run of this thread. */
typedef struct hrun {
    px_sched *s;
    PyObject *obj;           /* the Python run (_fibers._Run) */
    char *report;            /* the last deadlock report, malloc'd */
    PyObject *exec;          /* its Executor (see executor()), once asked for */
    PyObject *root;          /* the greenlet that called run() */
    PyObject *factory;       /* factory(fn, arg, status) -> greenlet */
    PyObject *failure;       /* an exception a signal raised while it waited */
    PyObject *pending;       /* a new greenlet whose turn it is: the root starts it */
    PyObject *next;          /* whose turn it is, after a greenlet that ends */
    PyObject *landed;        /* what the last switch back to the root passed */
    hfiber *turn;            /* the fiber whose turn it is */
    PyObject *idle[POOL_MAX];/* idle workers (strong references) */
    int nidle;
    PyThreadState *waiting;  /* while the scheduler waits in the kernel: no GIL */
    unsigned started;        /* greenlets the root started */
    pid_t pid;               /* the process it runs in (see begin) */
    struct hrun *forked;     /* the run of the parent of a fork that this one hides */
    int end;                 /* what ended the run: 0 or an error code */
    int closing;             /* finish_run: workers end instead of retiring */
    int inspecting;          /* inspect() is under way: describe only notes whose */
    hfiber *seen;            /* the fiber describe was last called for, and its id */
    uint64_t seen_id;        /* (inspect's visit reads them: see h_inspect) */
} hrun;

static _Thread_local hrun *run_here;
static PyObject *raise_for;  /* Python: raises the exception of a C code */
static PyObject *empty;      /* () */

static void release_fiber(void *ctx);
static void drop_holds(hrun *r, int close);
static void posted_call(void *arg, int status);

static const px_host_ops pulled = { NULL, NULL, release_fiber };

/* Raises the exception of `code` through the Python side; returns NULL. */
static PyObject *fail(int code)
{
    PyObject *r = PyObject_CallFunction(raise_for, "i", code);
    Py_XDECREF(r);
    if (!PyErr_Occurred())
        PyErr_Format(PyExc_SystemError, "parataxis: no exception for code %d", code);
    return NULL;
}

PyObject *pxh_fail(int code)
{
    return fail(code);
}

int pxh_in_run(void)
{
    return run_here != NULL;
}

static hrun *need_run(void)
{
    hrun *r = run_here;
    if (r == NULL)
        fail(PX_ENOFIBER);
    return r;
}

/* -- the fibers' records ---------------------------------------------------- */

/* Called by the scheduler when it drops the record: at the end of a fiber
** (its greenlet let go already), or when a freed scheduler discards a fiber
** that never ended -- then dropping the greenlet unwinds it (GreenletExit).
** A handler call whose job never started is owed its one call: it gets it
** here, aborted (off any fiber: the scheduler is being freed). */
static void release_fiber(void *ctx)
{
    hfiber *h = ctx;
    if (h->call.fn != NULL)
        h->call.fn(h->call.arg, PX_ECANCELED);
    if (h->glet != NULL || h->cur != NULL || h->job != NULL || h->scope != NULL) {
        PyGILState_STATE g = PyGILState_Ensure();
        Py_CLEAR(h->scope);
        Py_CLEAR(h->cur);
        Py_CLEAR(h->glet);
        Py_CLEAR(h->job);
        PyGILState_Release(g);
    }
    free(h);
}

static PyObject *worker_fn;  /* the run of every fiber's greenlet: worker() */

/* The job of a fiber that handler call c started: factory(key, None) for a
** Scheduler.post's call (key: its entry in _fibers._POSTED), factory(None,
** call) for any other (a _host.Call, see _timers.c).  A new reference, or NULL
** with an exception set. */
static PyObject *new_job(hrun *r, pxhost_call *c)
{
    if (c->fn == posted_call)
        return PyObject_CallFunction(r->factory, "KO", (unsigned long long)(uintptr_t)c->arg,
                                     Py_None);
    PyObject *call = pxh_call_new(c->fn, c->arg, c->status);
    if (call == NULL)
        return NULL;
    PyObject *job = PyObject_CallFunctionObjArgs(r->factory, Py_None, call, NULL);
    Py_DECREF(call);
    return job;
}

/* Binds `h` to a greenlet at its first turn: `reuse` if not NULL, else an
** idle worker, else a new one that the root will start.  Its job is made
** first if a handler started it.  Returns the greenlet (a new reference), or
** NULL with an exception set. */
static PyObject *greenlet_of(hrun *r, hfiber *h, PyObject *reuse)
{
    if (h->cur != NULL)
        return Py_NewRef(h->cur);
    if (h->glet == NULL) {
        if (h->job == NULL && (h->job = new_job(r, &h->call)) == NULL)
            return NULL;
        if (reuse != NULL)
            h->glet = Py_NewRef(reuse);
        else if (r->nidle > 0)
            h->glet = r->idle[--r->nidle];
        else if ((h->glet = (PyObject *)PyGreenlet_New(worker_fn, (PyGreenlet *)r->root)) == NULL)
            return NULL;
    }
    Py_INCREF(h->glet);
    return h->glet;
}

/* A signal's exception while the scheduler waited: the run keeps the first,
** cancels every fiber so that all of them unwind, and run() re-raises it. */
static void take_signal_failure(hrun *r)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (r->failure == NULL && value != NULL) {
        if (tb != NULL)
            PyException_SetTraceback(value, tb);
        r->failure = value;
        value = NULL;
    }
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    px_sched_cancel(r->s);
    drop_holds(r, 0);
}

/* Ends the turn of the calling fiber (status 0, or PX_HOST_DONE when its
** job ended) and pulls the next one: returns px_sched_next's outcome, with
** r->turn set when it is 1.  A signal while the scheduler waited is taken. */
static int pull(hrun *r, int status)
{
    void *ctx = NULL;
    int rc;
    for (;;) {
        rc = px_sched_next(r->s, status, &ctx);   /* the GIL: see on_wait */
        if (rc != PX_EINTR)
            break;
        status = 0;
        if (PyErr_CheckSignals() < 0)
            take_signal_failure(r);
    }
    if (rc == 1)
        r->turn = ctx;
    return rc;
}

/* The greenlet to switch to after pull() returned rc: the turn's (bound
** now if it is its first), or the root once the run is over; a greenlet not
** started yet is left to the root (r->pending, see root_loop), which is
** switched to instead.  A new reference, or NULL with an exception set. */
static PyObject *target_of(hrun *r, int rc)
{
    PyObject *target;
    if (rc == 1) {
        target = greenlet_of(r, r->turn, NULL);
        if (target == NULL)
            return NULL;
    } else {
        r->end = rc;
        target = Py_NewRef(r->root);
    }
    if (!PyGreenlet_STARTED((PyGreenlet *)target)) {
        /* A greenlet starts where it is first switched to and grows from
        ** there: started from a fiber, a chain of new fibers would nest
        ** deeper and deeper.  The root, near the bottom of the stack, starts
        ** each one (its turn is given already). */
        r->pending = target;
        target = Py_NewRef(r->root);
    }
    return target;
}

/* The next greenlet could not be had (its job could not be made, no memory
** for a greenlet): the turns are no longer what the scheduler thinks, so the
** run is given up.  The exception is thrown into the root, out of run(); the
** fibers left are discarded by finish_run (a handler call owed gets its
** aborted call in release_fiber).  Returns -1 when the caller's greenlet is
** resumed (by finish_run's GreenletExit). */
static int give_up(hrun *r)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    PyObject *v = PyGreenlet_Throw((PyGreenlet *)r->root, type, value, tb);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    Py_XDECREF(v);
    if (v != NULL)
        PyErr_SetString(PyExc_SystemError, "parataxis: a given-up fiber was resumed");
    return -1;
}

/* The greenlet that fiber `h`, whose turn it is, runs in as far as the host
** knows: the one its turn last resumed (hfiber.cur, kept while it lives) or
** its own.  A greenlet it switched into since without parking is not known. */
static PyObject *running_in(hfiber *h)
{
    if (h->cur != NULL && PyGreenlet_ACTIVE((PyGreenlet *)h->cur))
        return h->cur;
    return h->glet;
}

static const char refused[] = "a parked fiber's greenlet was switched into from another fiber";

/*
** A parked greenlet (a fiber's, a raw one a fiber parked in, an idle worker)
** was resumed not by its turn but by a switch into it from the code of the
** fiber whose turn it is (it kept a reference from greenlet.getcurrent(), or
** made the raw greenlet).  Going on would run the parked code on another
** fiber's turn, out of step with the scheduler; so the switch is refused:
** RuntimeError is thrown into the switcher -- taken to be the greenlet the
** turn's fiber runs in -- and the caller stays parked.  `v` is what the
** switch passed (dropped).  Returns what the caller is switched back with
** next (its turn, or another refused switch), or NULL with an exception set.
*/
static PyObject *refuse(hrun *r, PyObject *v)
{
    Py_DECREF(v);
    PyObject *me = (PyObject *)PyGreenlet_GetCurrent();
    PyObject *into = running_in(r->turn);
    Py_DECREF(me);
    PyObject *e = PyObject_CallFunction(PyExc_RuntimeError, "s", refused);
    if (e == NULL)
        return NULL;
    if (into == me || into == NULL) {   /* no switcher to send it to: ours then */
        PyErr_SetObject(PyExc_RuntimeError, e);
        Py_DECREF(e);
        return NULL;
    }
    v = PyGreenlet_Throw((PyGreenlet *)into, PyExc_RuntimeError, e, NULL);
    Py_DECREF(e);
    return v;
}

/* The switch that resumed a parked or idle greenlet, not at its turn,
** failed: was an exception thrown into it (greenlet.throw) by the code of the
** fiber whose turn it is, which must be refused as a switch is?  Not when the
** run is torn down (finish_run's GreenletExit), nor when no other greenlet
** threw it. */
static int thrown_by_turn(hrun *r)
{
    if (r->closing || r->turn == NULL)
        return 0;
    PyObject *me = (PyObject *)PyGreenlet_GetCurrent();
    PyObject *into = running_in(r->turn);
    Py_DECREF(me);
    return into != NULL && into != me;
}

/*
** Ends the turn of the calling fiber, which goes on (a park, a yield), and
** switches to the next one -- or to the root once the run is over.  Returns
** 0 when the caller has its turn again (at once when it is the next one
** itself), -1 with an exception set when a switch failed.  A fiber may park
** in a greenlet it made (greenlet.greenlet(g).switch() with g waiting): then
** its turn resumes that greenlet, not the fiber's own (hfiber.cur).  Resumed
** while another fiber has the turn, it refuses that switch (see refuse).
*/
static int pass_turn(hrun *r)
{
    PyGreenlet *me = PyGreenlet_GetCurrent();
    hfiber *mine = (PyObject *)me == r->root ? NULL : r->turn;
    if (mine != NULL && (PyObject *)me != mine->glet)
        Py_XSETREF(mine->cur, Py_NewRef((PyObject *)me));
    else if (mine != NULL && mine->cur != NULL)   /* a raw one it ran in before */
        Py_CLEAR(mine->cur);
    PyObject *target = target_of(r, pull(r, 0));
    if (target == NULL) {
        Py_DECREF(me);
        return mine != NULL ? give_up(r) : -1;
    }
    int out = 0;
    if (target != (PyObject *)me) {
        PyObject *v = PyGreenlet_Switch((PyGreenlet *)target, empty, NULL);
        /* Its turn again when the scheduler gave it (r->turn); a run being
        ** torn down (closing) has no turn to refuse from.  An exception
        ** thrown in out of turn is refused too: dropped, and RuntimeError
        ** thrown into the thrower, as for a switch. */
        for (;;) {
            if (v == NULL && mine != NULL && r->turn != mine && thrown_by_turn(r)) {
                PyErr_Clear();
                v = Py_NewRef(Py_None);
            }
            if (v == NULL || mine == NULL || r->turn == mine || r->closing)
                break;
            v = refuse(r, v);
        }
        if (v == NULL)
            out = -1;
        else if (mine == NULL)
            Py_XSETREF(r->landed, v);   /* the root's: see root_loop */
        else
            Py_DECREF(v);
    }
    Py_DECREF(me);
    Py_DECREF(target);
    return out;
}

int pxh_pass_turn(void)
{
    return pass_turn(run_here);
}

/*
** The job of the calling worker ended: ends its fiber and pulls the next
** turn.  A fiber at its first turn is run by this worker at once, without a
** switch.  Otherwise the worker becomes idle -- in the pool, parked here,
** counted by no scheduler -- and switches to the next one; a later fiber's
** first turn switches back to it (greenlet_of).  Returns 1 when the worker
** has a job again (r->turn's), 0 when it must end instead (the pool is full:
** the root switches to the next one, r->next, after its greenlet returned),
** -1 with an exception set: a failed switch, or GreenletExit when the pool
** dropped it.
*/
static int retire(hrun *r)
{
    int rc = pull(r, PX_HOST_DONE);
    PyObject *me = (PyObject *)PyGreenlet_GetCurrent();
    if (rc == 1 && r->turn->glet == NULL) {
        PyObject *g = greenlet_of(r, r->turn, me);
        Py_DECREF(me);
        Py_XDECREF(g);
        return g != NULL ? 1 : -1;
    }
    PyObject *target = target_of(r, rc);
    if (target == NULL || r->nidle == POOL_MAX) {
        /* Returning switches to the parent, the root: it goes on with r->next
        ** (or r->pending, or the end of the run). */
        Py_DECREF(me);
        if (target == NULL)
            return -1;
        if (target != r->root)
            r->next = target;
        else
            Py_DECREF(target);
        return 0;
    }
    r->idle[r->nidle++] = me;   /* the pool's reference: none is held here */
    PyObject *v = PyGreenlet_Switch((PyGreenlet *)target, empty, NULL);
    Py_DECREF(target);
    /* A job again once greenlet_of bound it to the turn's fiber; resumed
    ** while idle, it refuses the switch (see refuse), or a throw, whose
    ** exception is dropped. */
    for (;;) {
        if (v == NULL && r->turn->glet != me && thrown_by_turn(r)) {
            PyErr_Clear();
            v = Py_NewRef(Py_None);
        }
        if (v == NULL || r->turn->glet == me || r->closing)
            break;
        v = refuse(r, v);
    }
    if (v == NULL)
        return -1;
    Py_DECREF(v);
    return 1;
}

static PyObject *main_name;  /* "_main" */
static PyObject *ctx_name;   /* "_ctx" */

/* Runs job._main() in the job's own contextvars context, job._ctx: entered
** here, in the greenlet that runs it (greenlet keeps each greenlet's context),
** and left when it ends, so a worker reused for the next job carries nothing
** over.  Here rather than with Context.run in _main: a C frame between the
** worker and the body deepens every switch's stack copy (~200 ns a spawn). */
static PyObject *run_job(PyObject *job)
{
    PyObject *ctx = PyObject_GetAttr(job, ctx_name);
    if (ctx == NULL)
        return NULL;
    if (!PyContext_CheckExact(ctx) || PyContext_Enter(ctx) < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "a fiber's _ctx must be a contextvars.Context");
        Py_DECREF(ctx);
        return NULL;
    }
    PyObject *v = PyObject_CallMethodNoArgs(job, main_name);
    if (PyContext_Exit(ctx) < 0)
        Py_CLEAR(v);
    Py_DECREF(ctx);
    return v;
}

/*
** The run of every fiber's greenlet: runs the job of its turn, Fiber._main(),
** then retires and runs the next one it is given, until it is not kept.  The
** root started it deep in its stack (see root_loop): it first switches back,
** so that the root unwinds before anything else runs -- else every switch to a
** fiber started above that depth would copy the root's stack down to there.
** Errors out of _main end the greenlet: they reach the root, and run() raises.
*/
static PyObject *worker(PyObject *self, PyObject *args)
{
    (void)self, (void)args;
    hrun *r = run_here;
    PyObject *v = PyGreenlet_Switch((PyGreenlet *)r->root, empty, NULL);
    if (v == NULL)
        return NULL;
    Py_DECREF(v);
    for (;;) {
        hfiber *h = r->turn;
        PyObject *job = h->job;
        h->job = NULL;
        h->call.fn = NULL;              /* its handler call is the job's now */
        h->fiber = job;
        v = run_job(job);
        if (!r->closing)                /* else h may be freed: see release_fiber */
            h->fiber = NULL;
        Py_DECREF(job);
        if (v == NULL)
            return NULL;
        Py_DECREF(v);
        if (r->closing)                 /* unwound by finish_run: just end */
            Py_RETURN_NONE;
        int k = retire(r);
        if (k < 0)
            return NULL;
        if (k == 0)
            Py_RETURN_NONE;
    }
}

static PyMethodDef worker_def = { "worker", worker, METH_VARARGS,
                                  "The run of a fiber's greenlet (see _host.c)." };

/*
** Where the root starts a new greenlet.  greenlet lets all of a thread's
** greenlets share its C stack: each one's slice begins where it was first
** switched to, and a switch to a greenlet whose slice overlaps the running
** one's copies the running one's out to the heap and the other's back in.
** Fibers started at one depth would all overlap, so two fibers handing the
** thread to each other would copy both ways at every switch.  So the root
** starts the k-th new fiber SLOT_KIB * (k % SLOTS) KiB deeper: fibers started
** one after another get slices apart, and only every SLOTS-th one shares.
*/
enum { SLOTS = 8, SLOT_KIB = 16 };

static PyObject *switch_deeper(PyObject *glet, unsigned kib)
{
    volatile char pad[1024];
    pad[0] = (char)kib;
    if (kib == 0)
        return PyGreenlet_Switch((PyGreenlet *)glet, empty, NULL);
    PyObject *v = switch_deeper(glet, kib - 1);
    pad[sizeof pad - 1] = pad[0];   /* used after the call: the frame stays */
    return v;
}

/* A greenlet that is no fiber's switched to the root in the middle of a turn:
** one made outside the run (its parent is the root) ended, or a fiber switched
** to its parent.  What it passed goes to the greenlet the fiber whose turn it
** is runs in (running_in), as though that were its parent -- never a wrong resume of another
** fiber, nor a turn ended that never parked.  Returns what the root is
** switched back with next, or NULL with an exception set. */
static PyObject *back_to_turn(hrun *r)
{
    PyObject *in = running_in(r->turn);
    PyObject *target = in != NULL ? Py_NewRef(in) : greenlet_of(r, r->turn, NULL);
    if (target == NULL)
        return NULL;
    PyObject *v = r->landed;
    r->landed = NULL;
    PyObject *args = v == NULL ? Py_NewRef(empty) : PyTuple_Pack(1, v);
    Py_XDECREF(v);
    PyObject *out = args == NULL ? NULL : PyGreenlet_Switch((PyGreenlet *)target, args, NULL);
    Py_XDECREF(args);
    Py_DECREF(target);
    return out;
}

/* The root's side: starts the new greenlets it is handed, switches on after
** a greenlet that ended, pulls when nothing is under way, until the run is
** over.  A switch back here is that of a fiber starting another, a greenlet
** that ended, or the run's end -- each leaves r->pending, r->next or r->end
** set.  Past the first pull, one that leaves none of them is a greenlet that
** is no fiber's, in the middle of a turn (see back_to_turn). */
static int root_loop(hrun *r)
{
    r->end = 1;
    int first = 1;               /* no pull yet */
    for (;;) {
        PyObject *next = r->pending, *v;
        if (next != NULL) {
            r->pending = NULL;
            /* It switches back at once (see worker), then on to it. */
            v = switch_deeper(next, SLOT_KIB * (r->started++ % SLOTS));
            if (v != NULL) {
                Py_DECREF(v);
                v = PyGreenlet_Switch((PyGreenlet *)next, empty, NULL);
            }
            Py_DECREF(next);
        } else if ((next = r->next) != NULL) {   /* after a greenlet ended */
            r->next = NULL;
            v = PyGreenlet_Switch((PyGreenlet *)next, empty, NULL);
            Py_DECREF(next);
        } else if (r->end != 1) {
            Py_CLEAR(r->landed);
            return 0;
        } else if (!first) {
            v = back_to_turn(r);
        } else {
            first = 0;
            if (pass_turn(r) < 0)
                return -1;
            continue;
        }
        if (v == NULL)
            return -1;
        Py_XSETREF(r->landed, v);
    }
}

/* -- the module's functions ------------------------------------------------- */

/* The scheduler's on_deadlock: keeps the report for DeadlockError. */
static void keep_report(void *ctx, const char *report)
{
    hrun *r = ctx;
    free(r->report);
    r->report = strdup(report);
}

/* The scheduler's on_wait: the GIL is held while fibers run, and released
** only while the scheduler waits in the kernel for a deadline or a post. */
static void on_wait(void *ctx, int entering)
{
    hrun *r = ctx;
    if (entering)
        r->waiting = PyEval_SaveThread();
    else
        PyEval_RestoreThread(r->waiting);
}

static size_t describe(void *ctx, uint64_t id, void *host_ctx, char *buf, size_t cap);

PyDoc_STRVAR(begin_doc, "begin(run, root, factory, clock=0): starts this thread's run with a "
                        "new scheduler, from greenlet `root`, on clock `clock` (PX_CLOCK_REAL "
                        "or PX_CLOCK_VIRTUAL).");

static PyObject *h_begin(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *obj, *root, *factory;
    int clock = PX_CLOCK_REAL;
    if (!PyArg_ParseTuple(args, "OOO|i", &obj, &root, &factory, &clock))
        return NULL;
    /* In the child of a fork in a fiber, the parent's run is not ours (its
    ** fibers run in the parent): a new one may start, and hides it until it
    ** ends -- then the forking fiber may return into it (see finish_run). */
    hrun *forked = run_here != NULL && run_here->pid != getpid() ? run_here : NULL;
    if ((run_here != NULL && forked == NULL) || px_self() != 0)
        return fail(PX_EBUSY);
    if (!PyGreenlet_Check(root) || !PyCallable_Check(factory)) {
        PyErr_SetString(PyExc_TypeError, "begin(run, greenlet, callable)");
        return NULL;
    }
    hrun *r = calloc(1, sizeof *r);
    if (r == NULL)
        return PyErr_NoMemory();
    px_sched_opts o = { .on_deadlock = keep_report, .on_deadlock_ctx = r,
                        .on_wait = on_wait, .on_wait_ctx = r,
                        .token_scopes_hold = 1,     /* as px_run: nobody can hold it */
                        .clock = clock, .describe = describe, .describe_ctx = r };
    r->s = px_sched_new(&o);
    if (r->s == NULL) {
        free(r);
        if (clock != PX_CLOCK_REAL && clock != PX_CLOCK_VIRTUAL)
            return fail(PX_EINVAL);
        return PyErr_NoMemory();
    }
    r->pid = getpid();
    r->obj = Py_NewRef(obj);
    r->root = Py_NewRef(root);
    r->factory = Py_NewRef(factory);
    r->forked = forked;
    run_here = r;
    Py_RETURN_NONE;
}


PyDoc_STRVAR(finish_run_doc, "finish_run() -> (exception or None, report or None): ends this "
                             "thread's run and frees its scheduler; returns what a signal raised "
                             "while it waited, and the last deadlock report.");

static PyObject *h_finish_run(PyObject *self, PyObject *noargs)
{
    (void)self, (void)noargs;
    hrun *r = need_run();
    if (r == NULL)
        return NULL;
    drop_holds(r, 1);       /* posts from now on are refused, never handed to the
                            ** scheduler freed below: a run given up too */
    r->closing = 1;
    while (r->nidle > 0)    /* each idle worker ends (GreenletExit) */
        Py_DECREF(r->idle[--r->nidle]);
    /* Fibers left (a run given up) are unwound by the free: as their greenlets
    ** are dropped, GreenletExit runs their finally blocks, which find no run. */
    run_here = NULL;
    px_sched_free(r->s);
    (void)pxhost_sweep();   /* what the collector found busy: no fiber is left */
    run_here = r->forked;   /* a forked run this one hid: its loop goes on */
    PyObject *failure = r->failure ? r->failure : Py_NewRef(Py_None);
    PyObject *report = r->report ? PyUnicode_DecodeUTF8(r->report, strlen(r->report), "replace")
                                 : Py_NewRef(Py_None);
    free(r->report);
    Py_XDECREF(r->exec);
    Py_XDECREF(r->landed);
    Py_DECREF(r->obj);
    Py_DECREF(r->root);
    Py_DECREF(r->factory);
    free(r);
    if (report == NULL) {
        Py_DECREF(failure);
        return NULL;
    }
    return Py_BuildValue("(NN)", failure, report);
}

PyDoc_STRVAR(current_doc, "current() -> the run of this thread (begin's first argument), or None.");

static PyObject *h_current(PyObject *self, PyObject *noargs)
{
    (void)self, (void)noargs;
    return Py_NewRef(run_here ? run_here->obj : Py_None);
}

PyDoc_STRVAR(cancel_doc, "cancel(): cancels every fiber of this thread's run (px_sched_cancel).");

static PyObject *h_cancel(PyObject *self, PyObject *noargs)
{
    (void)self, (void)noargs;
    hrun *r = need_run();
    if (r == NULL)
        return NULL;
    px_sched_cancel(r->s);
    drop_holds(r, 0);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(loop_doc, "loop() -> int: from the root, runs the fibers until the run is over; "
                       "returns 0 or the C error that ended it (PX_EDEADLK, ...).");

static PyObject *h_loop(PyObject *self, PyObject *noargs)
{
    (void)self, (void)noargs;
    hrun *r = need_run();
    if (r == NULL)
        return NULL;
    if (root_loop(r) < 0)
        return NULL;
    return PyLong_FromLong(r->end);
}

static PyObject *name_str;       /* "name" */

/* Names fiber `id` (0: the calling one) `name`: a str, else nothing.  Out of
** memory, or for a name with no UTF-8 (lone surrogates), it goes unnamed:
** names are for reports. */
static void name_fiber(uint64_t id, PyObject *name)
{
    const char *text = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
    if (text == NULL)
        PyErr_Clear();
    else
        (void)px_fiber_set_name(id, text);
}

/* The Fiber of fiber h (borrowed): the one its greenlet runs, or the job it
** will run; NULL for a handler's fiber before its first turn. */
static PyObject *fiber_of(hfiber *h)
{
    return h->fiber != NULL ? h->fiber : h->job;
}

/* Gives fiber `id` (h's), which C has no name for, its default one, its
** Fiber's name (its function's __qualname__, see Fiber.name), as the dump
** that needs it is made: naming every fiber at its spawn measured ~8% of a
** spawn and join.  Never raises. */
static void name_by_default(uint64_t id, hfiber *h)
{
    PyObject *job = fiber_of(h);
    PyObject *name = job != NULL ? PyObject_GetAttr(job, name_str) : NULL;
    if (name != NULL)
        name_fiber(id, name);
    PyErr_Clear();
    Py_XDECREF(name);
}

PyDoc_STRVAR(spawn_doc, "spawn(fiber[, name]) -> (handle, id): makes a fiber of this thread's "
                        "run that will run fiber._main() on a greenlet, named `name` (a str; "
                        "None or none: by default, see name_by_default); returns a capsule of "
                        "its px_fiber (for wait(JOIN, ...) and release) and its id.");

static PyObject *h_spawn(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    (void)self;
    if (n < 1 || n > 2) {
        PyErr_SetString(PyExc_TypeError, "spawn(fiber[, name])");
        return NULL;
    }
    PyObject *job = args[0];
    hrun *r = need_run();
    if (r == NULL)
        return NULL;
    hfiber *h = calloc(1, sizeof *h);
    if (h == NULL)
        return PyErr_NoMemory();
    h->job = Py_NewRef(job);
    px_fiber *f = px_spawn_hosted(r->s, &pulled, h);
    if (f == NULL) {
        Py_DECREF(h->job);
        free(h);
        return PyErr_NoMemory();
    }
    if (n == 2)
        name_fiber(px_fiber_id(f), args[1]);
    PyObject *handle = PyCapsule_New(f, PXH_FIBER_CAPSULE, NULL);
    if (handle == NULL) {
        px_fiber_release(f);    /* it runs, detached */
        return NULL;
    }
    return Py_BuildValue("(NK)", handle, (unsigned long long)px_fiber_id(f));
}

PyDoc_STRVAR(group_spawn_doc, "group_spawn(group, fiber[, name]) -> (rc, handle, id): makes a "
                              "fiber of this thread's run, a member of `group` (a Prim of a "
                              "px_group), named as spawn's, that will run fiber._main() on a "
                              "greenlet; rc 0 with spawn's "
                              "handle and id, or the C code that refused it (PX_ECANCELED, "
                              "PX_ECLOSED, ...) with None and 0.");

static PyObject *h_group_spawn(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    (void)self;
    if (n < 2 || n > 3) {
        PyErr_SetString(PyExc_TypeError, "group_spawn(group, fiber[, name])");
        return NULL;
    }
    hrun *r = need_run();
    if (r == NULL)
        return NULL;
    px_group *g = pxh_prim_ptr(args[0], PXH_K_GROUP);
    if (g == NULL)
        return NULL;
    hfiber *h = calloc(1, sizeof *h);
    if (h == NULL)
        return PyErr_NoMemory();
    h->job = Py_NewRef(args[1]);
    px_fiber *f = NULL;
    int rc = px_group_spawn_hosted(g, &pulled, h, &f);
    if (rc != 0) {
        Py_DECREF(h->job);
        free(h);
        return Py_BuildValue("(iOK)", rc, Py_None, 0ULL);
    }
    if (n == 3)
        name_fiber(px_fiber_id(f), args[2]);
    /* The handle is spawn's (the Fiber releases it), the group's hold aside. */
    PyObject *handle = PyCapsule_New(f, PXH_FIBER_CAPSULE, NULL);
    if (handle == NULL) {
        px_fiber_release(f);    /* it runs, detached: still the group's */
        return NULL;
    }
    return Py_BuildValue("(iNK)", 0, handle, (unsigned long long)px_fiber_id(f));
}

PyDoc_STRVAR(release_doc, "release(handle): px_fiber_release of a handle spawn returned; "
                          "the handle is spent (a second release does nothing).");

static const char spent[] = "parataxis.px_fiber (released)";

static PyObject *h_release(PyObject *self, PyObject *arg)
{
    (void)self;
    if (PyCapsule_CheckExact(arg) && PyCapsule_GetName(arg) == spent)
        Py_RETURN_NONE;
    void *f = PyCapsule_GetPointer(arg, PXH_FIBER_CAPSULE);
    if (f == NULL || PyCapsule_SetName(arg, spent) != 0)
        return NULL;
    px_fiber_release(f);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(yield_doc, "yield_() -> None\n\nLets every other ready fiber run once, then goes on. "
                        "Raises NoFiberError off-fiber.");

static PyObject *h_yield(PyObject *self, PyObject *noargs)
{
    (void)self, (void)noargs;
    int rc = px_yield();
    if (rc == PX_EYIELD) {
        if (pass_turn(run_here) < 0)
            return NULL;
        Py_RETURN_NONE;
    }
    return rc == 0 ? Py_NewRef(Py_None) : fail(rc);
}

/* After a park that returned rc: waits for the turn when rc is PX_EYIELD and
** returns the park's outcome. */
static PyObject *parked(int rc)
{
    if (rc == PX_EYIELD && need_run() == NULL)   /* no park made it: bad input */
        return NULL;
    if (rc == PX_EYIELD) {
        if (pass_turn(run_here) < 0)
            return NULL;
        rc = px_park_result();
    }
    return PyLong_FromLong(rc);
}

PyDoc_STRVAR(park_doc, "park(rc) -> int: after a park that returned rc, waits for its turn "
                       "when rc is PX_EYIELD; returns the park's outcome.");

static PyObject *h_park(PyObject *self, PyObject *arg)
{
    (void)self;
    int rc = PyLong_AsLong(arg);
    if (rc == -1 && PyErr_Occurred())
        return NULL;
    return parked(rc);
}

PyDoc_STRVAR(sleep_doc, "sleep(ns) -> int: px_sleep(ns), waiting for the turn when it parks; "
                        "returns the sleep's outcome (0 or a C error code).");

static PyObject *h_sleep(PyObject *self, PyObject *arg)
{
    (void)self;
    long long ns = PyLong_AsLongLong(arg);
    if (ns == -1 && PyErr_Occurred())
        return NULL;
    return parked(px_sleep(ns));
}

PyDoc_STRVAR(wait_doc, "wait(op, obj[, value]) -> int: makes the call `op` (MUTEX_LOCK, ..., "
                       "JOIN) on obj (a Prim of its kind; a spawn handle for JOIN), and while "
                       "it returns PX_EYIELD waits for the turn and calls it again; returns "
                       "its outcome.  value: a Channel send's key.");

static PyObject *h_wait(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    (void)self;
    if (n < 2 || n > 3) {
        PyErr_SetString(PyExc_TypeError, "wait(op, obj[, value])");
        return NULL;
    }
    int op = PyLong_AsLong(args[0]);
    if (op == -1 && PyErr_Occurred())
        return NULL;
    pxh_op w;
    if (pxh_op_target(op, args[1], n == 3 ? args[2] : NULL, &w) != 0)
        return NULL;
    int rc;
    while ((rc = pxh_op_call(&w)) == PX_EYIELD) {
        if (pass_turn(run_here) < 0)
            return NULL;
    }
    return PyLong_FromLong(rc);
}

/* -- the scopes' nesting ---------------------------------------------------- */

/* The record of the calling fiber (the one whose turn it is), or NULL
** off-fiber: outside a run, or in the child of a fork. */
static hfiber *calling_fiber(void)
{
    hrun *r = run_here;
    if (r == NULL || px_self() == 0)
        return NULL;
    return r->turn;
}

PyDoc_STRVAR(scope_push_doc, "scope_push(scope) -> the calling fiber's innermost open scope "
                             "(None if none): scope becomes it.  NoFiberError off-fiber.");

static PyObject *h_scope_push(PyObject *self, PyObject *scope)
{
    (void)self;
    hfiber *h = calling_fiber();
    if (h == NULL)
        return fail(PX_ENOFIBER);
    PyObject *outer = h->scope != NULL ? h->scope : Py_NewRef(Py_None);
    h->scope = Py_NewRef(scope);
    return outer;
}

PyDoc_STRVAR(scope_pop_doc, "scope_pop(scope, outer) -> bool: when scope is the calling fiber's "
                            "innermost open scope, outer becomes it (True); else False "
                            "(another fiber's, out of order, off-fiber) and nothing changes.");

static PyObject *h_scope_pop(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    (void)self;
    if (n != 2) {
        PyErr_SetString(PyExc_TypeError, "scope_pop(scope, outer)");
        return NULL;
    }
    hfiber *h = calling_fiber();
    if (h == NULL || h->scope != args[0])
        Py_RETURN_FALSE;
    PyObject *old = h->scope;
    h->scope = args[1] == Py_None ? NULL : Py_NewRef(args[1]);
    Py_DECREF(old);
    Py_RETURN_TRUE;
}

PyDoc_STRVAR(scope_top_doc, "scope_top() -> the calling fiber's innermost open scope, or None "
                            "(also off-fiber).");

static PyObject *h_scope_top(PyObject *self, PyObject *noargs)
{
    (void)self, (void)noargs;
    hfiber *h = calling_fiber();
    return Py_NewRef(h != NULL && h->scope != NULL ? h->scope : Py_None);
}

/* -- seeing into a run: the current fiber, where each fiber is -------------- */

PyDoc_STRVAR(current_fiber_doc, "current_fiber() -> the Fiber whose body the calling fiber "
                                "runs, or None (off-fiber).");

static PyObject *h_current_fiber(PyObject *self, PyObject *noargs)
{
    (void)self, (void)noargs;
    hfiber *h = calling_fiber();
    return Py_NewRef(h != NULL && h->fiber != NULL ? h->fiber : Py_None);
}

/* The innermost frame of fiber h: the thread's when its greenlet is the one
** running (the fiber calling dump(), or the one whose pull a signal's dump
** came in), else its greenlet's gr_frame.  A new reference, or NULL when it
** has none (no greenlet yet: it has not started).  Never raises. */
static PyFrameObject *frame_of(hfiber *h)
{
    PyObject *g = running_in(h);
    if (g == NULL)
        return NULL;
    PyObject *cur = (PyObject *)PyGreenlet_GetCurrent();
    PyObject *frame;
    if (g == cur)
        frame = (PyObject *)PyThreadState_GetFrame(PyThreadState_Get());
    else
        frame = PyObject_GetAttrString(g, "gr_frame");
    Py_XDECREF(cur);
    if (frame == NULL)
        PyErr_Clear();
    if (frame == Py_None || (frame != NULL && !PyFrame_Check(frame)))
        Py_CLEAR(frame);
    return (PyFrameObject *)frame;
}

/* The UTF-8 text of attribute `name` of code object `code` (a static "?"
** when it has none), and its reference in *keep (to drop after use). */
static const char *code_text(PyObject *code, const char *name, PyObject **keep)
{
    *keep = PyObject_GetAttrString(code, name);
    const char *t = *keep != NULL && PyUnicode_Check(*keep) ? PyUnicode_AsUTF8(*keep) : NULL;
    if (t == NULL) {
        PyErr_Clear();
        return "?";
    }
    return t;
}

/* Appends frame f's line to buf (`File "f", line n, in name`), unless it is
** the body every fiber runs in (Fiber._main), which says nothing. */
static void frame_line(PyFrameObject *f, char *buf, size_t cap, size_t *len)
{
    PyCodeObject *code = PyFrame_GetCode(f);
    PyObject *kf, *kn;
    const char *file = code_text((PyObject *)code, "co_filename", &kf);
    const char *name = code_text((PyObject *)code, PY_VERSION_HEX >= 0x030B0000 ? "co_qualname"
                                                                            : "co_name", &kn);
    size_t fl = strlen(file);
    int body = (strcmp(name, "Fiber._main") == 0 || strcmp(name, "_main") == 0) && fl >= 10
               && strcmp(file + fl - 10, "_fibers.py") == 0;
    if (!body && *len + 1 < cap) {
        int w = snprintf(buf + *len, cap - *len, "%sFile \"%s\", line %d, in %s",
                         *len ? "\n" : "", file, PyFrame_GetLineNumber(f), name);
        if (w > 0)
            *len = *len + (size_t)w < cap ? *len + (size_t)w : cap - 1;
    }
    Py_XDECREF(kf);
    Py_XDECREF(kn);
    Py_DECREF(code);
}

enum { FRAMES_MAX = 48 };   /* the innermost frames a description shows */

/* Fiber h's Python stack as text, outermost call first, into buf (cap > 0
** bytes, NUL-terminated); returns its length.  The GIL is held. */
static size_t stack_text(hfiber *h, char *buf, size_t cap)
{
    PyFrameObject *frames[FRAMES_MAX];
    int n = 0;
    PyFrameObject *f = frame_of(h);
    while (f != NULL && n < FRAMES_MAX) {
        frames[n++] = f;
        f = PyFrame_GetBack(f);
    }
    size_t len = 0;
    buf[0] = '\0';
    if (f != NULL) {
        int w = snprintf(buf, cap, "... (outer frames left out)");
        len = w > 0 && (size_t)w < cap ? (size_t)w : 0;
        Py_DECREF(f);
    }
    if (n == 0 && h->glet == NULL && h->cur == NULL) {
        int w = snprintf(buf, cap, "not started yet");
        len = w > 0 && (size_t)w < cap ? (size_t)w : 0;
    }
    while (n > 0) {
        f = frames[--n];
        frame_line(f, buf, cap, &len);
        Py_DECREF(f);
    }
    return len;
}

/*
** The scheduler's describe (px_sched_opts.describe): where hosted fiber
** `host_ctx` is, its Python stack, for px_dump -- the dump a signal posts
** (PARATAXIS_DUMP_SIGNAL, px.dump_signal), written in px_sched_next's turn
** with the GIL held, or one called through cffi, which released it: the GIL
** is taken either way.  It raises nothing (an exception under way is kept),
** and the collector is kept off meanwhile, as a finalizer could release or
** spawn fibers while the scheduler walks them.  While inspect() runs it only
** notes which fiber the visit that follows is for.
*/
static size_t describe(void *ctx, uint64_t id, void *host_ctx, char *buf, size_t cap)
{
    hrun *r = ctx;
    if (r->inspecting) {
        r->seen = host_ctx;
        r->seen_id = id;
        return 0;
    }
    if (cap == 0 || host_ctx == NULL)
        return 0;
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    int gc = PyGC_Disable();
    size_t len = stack_text(host_ctx, buf, cap);
    if (px_fiber_name(id) == NULL)   /* this table has its stack; the next ones its name */
        name_by_default(id, host_ctx);
    if (gc)
        PyGC_Enable();
    PyErr_Clear();
    PyErr_Restore(type, value, tb);
    PyGILState_Release(g);
    return len;
}

/* Text of C string `s` (NULL: None): a new reference, or NULL with an error. */
static PyObject *text_or_none(const char *s)
{
    if (s == NULL)
        return Py_NewRef(Py_None);
    return PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "replace");
}

typedef struct inspection {
    hrun *r;
    PyObject *list;
    int failed;
} inspection;

static int visit(void *ctx, const px_fiber_info *i)
{
    inspection *v = ctx;
    hrun *r = v->r;
    PyObject *frame = NULL, *job = NULL;
    if (i->hosted && r->seen != NULL && r->seen_id == i->id) {
        frame = (PyObject *)frame_of(r->seen);
        job = fiber_of(r->seen);
    }
    r->seen = NULL;
    PyObject *holders = PyTuple_New((Py_ssize_t)i->nholders);
    for (size_t k = 0; holders != NULL && k < i->nholders; k++) {
        PyObject *num = PyLong_FromUnsignedLongLong(px_fiber_number(i->holders[k]));
        if (num == NULL)
            Py_CLEAR(holders);
        else
            PyTuple_SET_ITEM(holders, (Py_ssize_t)k, num);
    }
    PyObject *item = NULL;
    if (holders != NULL)
        item = Py_BuildValue("(KKNiNNNNiILLNO)", (unsigned long long)i->id,
                             (unsigned long long)i->number, text_or_none(i->name), i->state,
                             text_or_none(i->reason), text_or_none(i->kind),
                             text_or_none(i->object_name[0] ? i->object_name : NULL), holders,
                             i->fd, i->events, (long long)i->deadline, (long long)i->parked_ns,
                             frame != NULL ? frame : Py_NewRef(Py_None),
                             job != NULL ? job : Py_None);
    else
        Py_XDECREF(frame);
    if (item == NULL || PyList_Append(v->list, item) != 0) {
        Py_XDECREF(item);
        v->failed = 1;
        return 1;
    }
    Py_DECREF(item);
    return 0;
}

PyDoc_STRVAR(inspect_doc, "inspect() -> [(id, number, name, state, reason, kind, object_name, "
                          "holders, fd, events, deadline_ns, waited_ns, frame, fiber)]: every "
                          "live fiber of this thread's run (px_sched_inspect), in spawn order; "
                          "name is its C name (None: none yet), holders are fiber numbers, "
                          "frame the innermost Python frame of the fiber's greenlet (None "
                          "before it started), fiber its Fiber (None for a handler's before "
                          "its first turn).");

static PyObject *h_inspect(PyObject *self, PyObject *noargs)
{
    (void)self, (void)noargs;
    hrun *r = need_run();
    if (r == NULL)
        return NULL;
    inspection v = { r, PyList_New(0), 0 };
    if (v.list == NULL)
        return NULL;
    /* No finalizer may run while the scheduler walks its fibers (see describe). */
    int gc = PyGC_Disable();
    r->inspecting = 1;
    r->seen = NULL;
    int rc = px_sched_inspect(r->s, visit, &v);
    r->inspecting = 0;
    r->seen = NULL;
    if (gc)
        PyGC_Enable();
    if (v.failed || rc < 0) {
        Py_DECREF(v.list);
        return v.failed ? NULL : fail(rc);
    }
    return v.list;
}

/* -- the executor that starts handler calls as fibers ---------------------- */

/*
** A run's executor is the bindings' shared one (pxhost.h): post() hands a
** handler call to the run, which spawns the pulled fiber that will run it.
** Timer queues and Scheduler.post use it from any thread, for as long as
** their Python objects live -- longer than the run: once it ended (closed) a
** call is aborted at once, as an executor may do with what it cannot run.
** Its Executor object owns the executor's one reference.
*/

/* Off-fiber (no fiber could be made for it, or the scheduler was freed with
** the call posted): it runs inline, as a handler is owed its one call --
** aborted once the run is over (finish_run closed the executor), as every
** call a run never started. */
static void cannot_start(pxhost_call *c, int over)
{
    c->fn(c->arg, over ? PX_ECANCELED : c->status);
    free(c);                 /* the hfiber: its call is its first member */
}

static const pxhost_exec_ops exec_ops = { &pulled, cannot_start };

/* Hands fn(arg, status) to the run of `x`; PX_ECLOSED once it is over. */
static int post_to(pxhost_exec *x, px_handler_fn fn, void *arg, int status)
{
    hfiber *h = calloc(1, sizeof *h);
    if (h == NULL)
        return PX_ENOMEM;
    h->call.fn = fn;
    h->call.arg = arg;
    int rc = pxhost_exec_post(x, &h->call, status);
    if (rc != 0)
        free(h);
    return rc;
}

/* The executor's post, for timer queues: a call that comes after the run is
** made at once, aborted -- a handler is owed its call, not lost. */
static int post_handler(void *ctx, px_handler_fn fn, void *arg, int status)
{
    if (ctx == NULL || fn == NULL)
        return PX_EINVAL;
    int rc = post_to(ctx, fn, arg, status);
    if (rc == PX_ECLOSED) {
        fn(arg, PX_ECANCELED);
        rc = 0;
    }
    return rc;
}

/* The px_handler_fn of Scheduler.post's calls: only called inline (see
** cannot_start); a fiber runs the others. */
static PyObject *posted_fn;  /* Python: _fibers._posted(key, status) */

static void posted_call(void *arg, int status)
{
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *r = PyObject_CallFunction(posted_fn, "Ki", (unsigned long long)(uintptr_t)arg,
                                        status);
    if (r == NULL)
        PyErr_WriteUnraisable(posted_fn);
    Py_XDECREF(r);
    PyGILState_Release(g);
}

/*
** The run's executor as Python holds it: an Executor object owns the
** executor's one reference, and the buffer it exports is the px_executor a
** timer queue copies ({ post_handler, the executor, no flush }), which cffi
** views typed (ffi.from_buffer("px_executor *", executor)).
*/
typedef struct hexec_obj {
    PyObject_HEAD
    px_executor e;
    pxhost_exec *x;
} hexec_obj;

static void hexec_dealloc(hexec_obj *o)
{
    pxhost_exec_unref(o->x);
    Py_TYPE(o)->tp_free((PyObject *)o);
}

static int hexec_getbuffer(hexec_obj *o, Py_buffer *view, int flags)
{
    return PyBuffer_FillInfo(view, (PyObject *)o, &o->e, sizeof o->e, 1, flags);
}

static PyBufferProcs hexec_buffer = { (getbufferproc)hexec_getbuffer, NULL };

static PyTypeObject hexec_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "parataxis._host.Executor",
    .tp_basicsize = sizeof(hexec_obj),
    .tp_dealloc = (destructor)hexec_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The executor of a run (executor()): its buffer is a px_executor.",
    .tp_as_buffer = &hexec_buffer,
};

/* The executor of an Executor object, or NULL with TypeError set. */
static pxhost_exec *exec_of(PyObject *o)
{
    if (Py_IS_TYPE(o, &hexec_type))
        return ((hexec_obj *)o)->x;
    PyErr_Format(PyExc_TypeError, "expected a _host.Executor, not %s", Py_TYPE(o)->tp_name);
    return NULL;
}

PyDoc_STRVAR(executor_doc, "executor() -> Executor: the executor of this thread's run, whose "
                           "buffer is the px_executor a timer queue copies.");

static PyObject *h_executor(PyObject *self, PyObject *noargs)
{
    (void)self, (void)noargs;
    hrun *r = need_run();
    if (r == NULL)
        return NULL;
    if (r->exec == NULL) {
        hexec_obj *o = PyObject_New(hexec_obj, &hexec_type);
        if (o == NULL)
            return NULL;
        o->x = pxhost_exec_new(r->s, &exec_ops);
        if (o->x == NULL) {
            Py_DECREF(o);
            return PyErr_NoMemory();
        }
        o->e = (px_executor){ post_handler, o->x, NULL };
        r->exec = (PyObject *)o;
    }
    return Py_NewRef(r->exec);
}

PyDoc_STRVAR(post_doc, "post(executor, key) -> int: posts Scheduler.post's call `key` through "
                       "the Executor (any thread); 0, or a C error code.");

static PyObject *h_post(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *exec;
    unsigned long long key;
    if (!PyArg_ParseTuple(args, "OK", &exec, &key))
        return NULL;
    pxhost_exec *x = exec_of(exec);
    if (x == NULL)
        return NULL;
    /* PX_ECLOSED after the run: Scheduler.post raises Closed (the caller is
    ** there to be told, unlike a timer queue's worker). */
    return PyLong_FromLong(post_to(x, posted_call, (void *)(uintptr_t)key, 0));
}

/* Lets go of every hold of the run's executor, for good: a cancelled run
** waits for no timer; at the end of the run, the executor is closed too. */
static void drop_holds(hrun *r, int close)
{
    if (r->exec == NULL)
        return;
    pxhost_exec *x = ((hexec_obj *)r->exec)->x;
    if (close)
        (void)pxhost_exec_close(x, 1);
    else
        pxhost_exec_cancel(x);
}

PyDoc_STRVAR(hold_doc, "hold(executor) -> bool: holds the run of the Executor (px_sched_hold: "
                       "it neither ends nor reports a deadlock) for a timer whose handler "
                       "will post to it; False (no hold) once the run is cancelled or over.  "
                       "Any thread.");

static PyObject *h_hold(PyObject *self, PyObject *exec)
{
    (void)self;
    pxhost_exec *x = exec_of(exec);
    if (x == NULL)
        return NULL;
    return PyBool_FromLong(pxhost_exec_hold(x));
}

PyDoc_STRVAR(unhold_doc, "unhold(executor): lets go of one hold() that returned True (nothing "
                         "once the run dropped its holds).  Any thread.");

static PyObject *h_unhold(PyObject *self, PyObject *exec)
{
    (void)self;
    pxhost_exec *x = exec_of(exec);
    if (x == NULL)
        return NULL;
    pxhost_exec_unhold(x);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(close_exec_doc, "close_executor() -> bool: at the end of a run, closes its executor "
                             "unless calls are still posted (True: closed; False: run again).");

static PyObject *h_close_executor(PyObject *self, PyObject *noargs)
{
    (void)self, (void)noargs;
    hrun *r = need_run();
    if (r == NULL)
        return NULL;
    if (r->exec == NULL)
        Py_RETURN_TRUE;
    return PyBool_FromLong(pxhost_exec_close(((hexec_obj *)r->exec)->x, 0));
}

PyDoc_STRVAR(configure_doc, "configure(posted): the Python function that runs Scheduler.post's "
                            "call `key` inline, as posted(key, status).");

static PyObject *h_configure(PyObject *self, PyObject *fn)
{
    (void)self;
    Py_XSETREF(posted_fn, Py_NewRef(fn));
    Py_RETURN_NONE;
}

/* -- the module ------------------------------------------------------------- */

static PyMethodDef methods[] = {
    { "begin", h_begin, METH_VARARGS, begin_doc },
    { "finish_run", h_finish_run, METH_NOARGS, finish_run_doc },
    { "current", h_current, METH_NOARGS, current_doc },
    { "cancel", h_cancel, METH_NOARGS, cancel_doc },
    { "loop", h_loop, METH_NOARGS, loop_doc },
    { "spawn", (PyCFunction)(void (*)(void))h_spawn, METH_FASTCALL, spawn_doc },
    { "release", h_release, METH_O, release_doc },
    { "group_spawn", (PyCFunction)(void (*)(void))h_group_spawn, METH_FASTCALL, group_spawn_doc },
    { "yield_", h_yield, METH_NOARGS, yield_doc },
    { "park", h_park, METH_O, park_doc },
    { "sleep", h_sleep, METH_O, sleep_doc },
    { "wait", (PyCFunction)(void (*)(void))h_wait, METH_FASTCALL, wait_doc },
    { "executor", h_executor, METH_NOARGS, executor_doc },
    { "scope_push", h_scope_push, METH_O, scope_push_doc },
    { "scope_pop", (PyCFunction)(void (*)(void))h_scope_pop, METH_FASTCALL, scope_pop_doc },
    { "scope_top", h_scope_top, METH_NOARGS, scope_top_doc },
    { "post", h_post, METH_VARARGS, post_doc },
    { "close_executor", h_close_executor, METH_NOARGS, close_exec_doc },
    { "hold", h_hold, METH_O, hold_doc },
    { "unhold", h_unhold, METH_O, unhold_doc },
    { "configure", h_configure, METH_O, configure_doc },
    { "current_fiber", h_current_fiber, METH_NOARGS, current_fiber_doc },
    { "inspect", h_inspect, METH_NOARGS, inspect_doc },
    { NULL, NULL, 0, NULL },
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "parataxis._host",
    "The greenlet host of Python fibers (see _host.c); used by parataxis._fibers.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__host(void);

PyMODINIT_FUNC PyInit__host(void)
{
    PyGreenlet_Import();
    if (_PyGreenlet_API == NULL)
        return NULL;
    PyObject *errors = PyImport_ImportModule("parataxis._errors");
    if (errors == NULL)
        return NULL;
    raise_for = PyObject_GetAttrString(errors, "raise_for");
    empty = PyTuple_New(0);
    main_name = PyUnicode_InternFromString("_main");
    ctx_name = PyUnicode_InternFromString("_ctx");
    name_str = PyUnicode_InternFromString("name");
    worker_fn = PyCFunction_New(&worker_def, NULL);
    PyObject *m = NULL;
    if (raise_for != NULL && empty != NULL && main_name != NULL && ctx_name != NULL
        && name_str != NULL && worker_fn != NULL)
        m = PyModule_Create(&module);
    if (m != NULL && (PyType_Ready(&hexec_type) != 0
                      || PyModule_AddObjectRef(m, "Executor", (PyObject *)&hexec_type) != 0
                      || pxh_add_handles(m) != 0 || pxh_add_timers(m) != 0
                      || pxh_add_io(m, errors) != 0))
        Py_CLEAR(m);
    Py_DECREF(errors);
    return m;
}
