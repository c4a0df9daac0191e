/*
** _host.c -- parataxis._host, the greenlet host of Python fibers.
**
** Each Python fiber is a greenlet and a pulled fiber of a C scheduler: the
** scheduler decides whose turn it is (px_sched_next), the greenlets switch
** straight to one another.  A fiber that would park gets PX_EYIELD from the
** C call, pulls the next turn and switches to it; once switched back, it
** collects the outcome.  So no C frame of the library is ever on a parked
** greenlet's stack (greenlet copies a parked greenlet's stack slice away and
** lets others use the space), and a yield is one C call and one switch.
**
** This is a CPython extension rather than cffi code because its calls must
** switch greenlets, which needs the GIL, and cffi releases the GIL around
** every C call: here the GIL is held except while the scheduler may wait in
** the kernel (px_sched_next).
**
** The state of a run lives in a thread-local record (a thread runs one
** scheduler at a time); the Python side (_fibers.py) makes the scheduler and
** gives it to begin().
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <greenlet/greenlet.h>

#include <stdint.h>
#include <stdlib.h>

#include "parataxis.h"

/* A pulled fiber's host_ctx.  A fiber spawned from Python has its greenlet
** from the start; one that a handler or a post starts (on a C fiber, without
** the GIL) gets it from the run's factory at its first turn. */
typedef struct hfiber {
    PyObject *glet;          /* a strong reference while the fiber lives */
    px_handler_fn fn;        /* a handler call to run in it (glet NULL) */
    void *arg;
    int status;
} hfiber;

/* The run of this thread. */
typedef struct hrun {
    px_sched *s;
    PyObject *root;          /* the greenlet that called run() */
    PyObject *factory;       /* factory(fn, arg, status) -> greenlet */
    PyObject *failure;       /* an exception a signal raised while it waited */
    int end;                 /* what ended the run: 0 or an error code */
} hrun;

static _Thread_local hrun *run_here;
static PyObject *raise_for;  /* Python: raises the exception of a C code */
static PyObject *empty;      /* () */

static void release_fiber(void *ctx);

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
** that never ended -- then dropping the greenlet unwinds it (GreenletExit). */
static void release_fiber(void *ctx)
{
    hfiber *h = ctx;
    if (h->glet != NULL) {
        PyGILState_STATE g = PyGILState_Ensure();
        Py_CLEAR(h->glet);
        PyGILState_Release(g);
    }
    free(h);
}

/* The greenlet of `h`, made at its first turn if a handler started it; a new
** reference, or NULL with an exception set. */
static PyObject *greenlet_of(hrun *r, hfiber *h)
{
    if (h->glet == NULL) {
        h->glet = PyObject_CallFunction(r->factory, "KKi", (unsigned long long)(uintptr_t)h->fn,
                                        (unsigned long long)(uintptr_t)h->arg, h->status);
        if (h->glet == NULL)
            return NULL;
        if (!PyGreenlet_Check(h->glet)) {
            Py_CLEAR(h->glet);
            PyErr_SetString(PyExc_TypeError, "parataxis: the factory made no greenlet");
            return NULL;
        }
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
}

/*
** Ends the turn of the calling fiber (status 0, or PX_HOST_DONE when its
** body ended), pulls the next turn and switches to that fiber -- or to the
** root once the run is over.  Returns 0 when the caller has its turn again
** (at once when it is the next one itself); for an ended fiber it sets the
** greenlet's parent to the next one instead, so that returning from its run
** switches there.  -1 with an exception set when a switch failed.
*/
static int pass_turn(hrun *r, int status)
{
    void *ctx = NULL;
    int rc;
    for (;;) {
        Py_BEGIN_ALLOW_THREADS
        rc = px_sched_next(r->s, status, &ctx);
        Py_END_ALLOW_THREADS
        if (rc != PX_EINTR)
            break;
        status = 0;
        if (PyErr_CheckSignals() < 0)
            take_signal_failure(r);
    }
    PyObject *target;
    if (rc == 1) {
        target = greenlet_of(r, ctx);
        if (target == NULL)
            return -1;
    } else {
        r->end = rc;
        target = r->root;
        Py_INCREF(target);
    }
    PyGreenlet *me = PyGreenlet_GetCurrent();
    int out = 0;
    if (status == PX_HOST_DONE) {
        out = PyGreenlet_SetParent(me, (PyGreenlet *)target);
    } else if (target != (PyObject *)me) {
        PyObject *v = PyGreenlet_Switch((PyGreenlet *)target, empty, NULL);
        if (v == NULL)
            out = -1;
        Py_XDECREF(v);
    }
    Py_DECREF(me);
    Py_DECREF(target);
    return out;
}

/* -- the module's functions ------------------------------------------------- */

PyDoc_STRVAR(begin_doc, "begin(sched, root, factory): starts this thread's run of scheduler "
                        "address `sched`, from greenlet `root`.");

static PyObject *h_begin(PyObject *self, PyObject *args)
{
    (void)self;
    unsigned long long s;
    PyObject *root, *factory;
    if (!PyArg_ParseTuple(args, "KOO", &s, &root, &factory))
        return NULL;
    if (run_here != NULL)
        return fail(PX_EBUSY);
    if (!PyGreenlet_Check(root) || !PyCallable_Check(factory)) {
        PyErr_SetString(PyExc_TypeError, "begin(sched, greenlet, callable)");
        return NULL;
    }
    hrun *r = calloc(1, sizeof *r);
    if (r == NULL)
        return PyErr_NoMemory();
    r->s = (px_sched *)(uintptr_t)s;
    r->root = Py_NewRef(root);
    r->factory = Py_NewRef(factory);
    run_here = r;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(finish_run_doc, "finish_run() -> exception or None: ends this thread's run; returns "
                             "what a signal raised while it waited, if anything.");

static PyObject *h_finish_run(PyObject *self, PyObject *noargs)
{
    (void)self, (void)noargs;
    hrun *r = need_run();
    if (r == NULL)
        return NULL;
    run_here = NULL;
    PyObject *failure = r->failure ? r->failure : Py_NewRef(Py_None);
    Py_DECREF(r->root);
    Py_DECREF(r->factory);
    free(r);
    return failure;
}

PyDoc_STRVAR(loop_doc, "loop() -> int: from the root, runs the fibers until the run is over; "
                       "returns 0 or the C error that ended it (PX_EDEADLK, ...).");

static PyObject *h_loop(PyObject *self, PyObject *noargs)
{
    (void)self, (void)noargs;
    hrun *r = need_run();
    if (r == NULL)
        return NULL;
    r->end = 1;
    while (r->end == 1) {   /* a fiber may switch here by mistake: pull on */
        if (pass_turn(r, 0) < 0)
            return NULL;
    }
    return PyLong_FromLong(r->end);
}

PyDoc_STRVAR(spawn_doc, "spawn(greenlet) -> int: makes the greenlet a fiber of this thread's run; "
                        "returns the px_fiber address.");

static PyObject *h_spawn(PyObject *self, PyObject *glet)
{
    (void)self;
    hrun *r = need_run();
    if (r == NULL)
        return NULL;
    hfiber *h = calloc(1, sizeof *h);
    if (h == NULL)
        return PyErr_NoMemory();
    h->glet = Py_NewRef(glet);
    px_fiber *f = px_spawn_hosted(r->s, &pulled, h);
    if (f == NULL) {
        Py_DECREF(h->glet);
        free(h);
        return PyErr_NoMemory();
    }
    return PyLong_FromVoidPtr(f);
}

PyDoc_STRVAR(finish_doc, "finish(): the calling fiber's body ended; its greenlet must return "
                         "right after, which switches to the next fiber.");

static PyObject *h_finish(PyObject *self, PyObject *noargs)
{
    (void)self, (void)noargs;
    hrun *r = need_run();
    if (r == NULL)
        return NULL;
    if (pass_turn(r, PX_HOST_DONE) < 0)
        return NULL;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(yield_doc, "yield_() -> None\n\nLets every other ready fiber run once, then goes on. "
                        "Raises NoFiberError off-fiber.");

static PyObject *h_yield(PyObject *self, PyObject *noargs)
{
    (void)self, (void)noargs;
    int rc = px_yield();
    if (rc == PX_EYIELD) {
        if (pass_turn(run_here, 0) < 0)
            return NULL;
        Py_RETURN_NONE;
    }
    return rc == 0 ? Py_NewRef(Py_None) : fail(rc);
}

PyDoc_STRVAR(park_doc, "park(rc) -> int: after a park or sleep that returned rc, waits for its "
                       "turn when rc is PX_EYIELD; returns the park's outcome.");

static PyObject *h_park(PyObject *self, PyObject *arg)
{
    (void)self;
    int rc = PyLong_AsLong(arg);
    if (rc == -1 && PyErr_Occurred())
        return NULL;
    if (rc == PX_EYIELD) {
        if (pass_turn(run_here, 0) < 0)
            return NULL;
        rc = px_park_result();
    }
    return PyLong_FromLong(rc);
}

typedef int (*op_fn)(void *obj);
typedef int (*op_out_fn)(void *obj, void *out);

PyDoc_STRVAR(wait_doc, "wait(fn, obj[, out]) -> int: calls C function address fn(obj[, out]), "
                       "and while it returns PX_EYIELD waits for the turn and calls it again; "
                       "returns its outcome.");

static PyObject *h_wait(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    (void)self;
    if (n < 2 || n > 3) {
        PyErr_SetString(PyExc_TypeError, "wait(fn, obj[, out])");
        return NULL;
    }
    void *fn = PyLong_AsVoidPtr(args[0]);
    void *obj = PyLong_AsVoidPtr(args[1]);
    void *out = n == 3 ? PyLong_AsVoidPtr(args[2]) : NULL;
    if (PyErr_Occurred())
        return NULL;
    /* The address of a C function, from cffi: a conversion POSIX allows. */
    op_fn op;
    op_out_fn op_out;
    memcpy(&op, &fn, sizeof op);
    memcpy(&op_out, &fn, sizeof op_out);
    int rc;
    for (;;) {
        rc = n == 3 ? op_out(obj, out) : op(obj);
        if (rc != PX_EYIELD)
            break;
        if (pass_turn(run_here, 0) < 0)
            return NULL;
    }
    return PyLong_FromLong(rc);
}

/* -- the executor that starts handler calls as fibers ---------------------- */

/* On a C fiber of the scheduler (handler_fiber), or off-fiber when no fiber
** could be made or the scheduler is freed with the call still posted: then it
** runs the call inline, as a handler is owed its one call. */
static void start_handler(void *arg, int status)
{
    hfiber *h = arg;
    h->status = status;
    px_sched *s = (px_sched *)(uintptr_t)0;
    (void)s;
    if (px_self() != 0 && run_here != NULL &&
        px_spawn_hosted(run_here->s, &pulled, h) != NULL)
        return;
    h->fn(h->arg, status);
    free(h);
}

/* The executor's post: hands fn(arg, status) to the scheduler's own executor,
** which starts start_handler on a C fiber. */
static int post_handler(void *ctx, px_handler_fn fn, void *arg, int status)
{
    if (ctx == NULL || fn == NULL)
        return PX_EINVAL;
    hfiber *h = calloc(1, sizeof *h);
    if (h == NULL)
        return PX_ENOMEM;
    h->fn = fn;
    h->arg = arg;
    px_executor inner = px_sched_executor(ctx);
    int rc = inner.post(inner.ctx, start_handler, h, status);
    if (rc != 0)
        free(h);
    return rc;
}

PyDoc_STRVAR(executor_doc, "executor() -> (post, start): the C addresses of the executor's post "
                           "function (ctx: the px_sched) and of start_handler.");

static PyObject *h_executor(PyObject *self, PyObject *noargs)
{
    (void)self, (void)noargs;
    void *post, *start;
    int (*p)(void *, px_handler_fn, void *, int) = post_handler;
    void (*st)(void *, int) = start_handler;
    memcpy(&post, &p, sizeof post);
    memcpy(&start, &st, sizeof start);
    return Py_BuildValue("(NN)", PyLong_FromVoidPtr(post), PyLong_FromVoidPtr(start));
}

/* -- the module ------------------------------------------------------------- */

static PyMethodDef methods[] = {
    { "begin", h_begin, METH_VARARGS, begin_doc },
    { "finish_run", h_finish_run, METH_NOARGS, finish_run_doc },
    { "loop", h_loop, METH_NOARGS, loop_doc },
    { "spawn", h_spawn, METH_O, spawn_doc },
    { "finish", h_finish, METH_NOARGS, finish_doc },
    { "yield_", h_yield, METH_NOARGS, yield_doc },
    { "park", h_park, METH_O, park_doc },
    { "wait", (PyCFunction)(void (*)(void))h_wait, METH_FASTCALL, wait_doc },
    { "executor", h_executor, METH_NOARGS, executor_doc },
    { NULL, NULL, 0, NULL },
};

PyDoc_STRVAR(set_raise_doc, "");

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "parataxis._host",
    "The greenlet host of Python fibers (see _host.c); used by parataxis._fibers.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__host(void);

PyMODINIT_FUNC PyInit__host(void)
{
    (void)set_raise_doc;
    PyGreenlet_Import();
    if (_PyGreenlet_API == NULL)
        return NULL;
    PyObject *errors = PyImport_ImportModule("parataxis._errors");
    if (errors == NULL)
        return NULL;
    raise_for = PyObject_GetAttrString(errors, "raise_for");
    Py_DECREF(errors);
    empty = PyTuple_New(0);
    if (raise_for == NULL || empty == NULL)
        return NULL;
    return PyModule_Create(&module);
}
