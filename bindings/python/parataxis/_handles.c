/*
** _handles.c -- part of parataxis._host: the C objects Python holds through a
** handle made here -- the sync family's (Prim) and cancellation tokens (Token)
** -- and the calls that may park a fiber, named by a small enum rather than by
** a C function address.
**
** A handle makes its C object (px_mutex_new, ...) and keeps its address.  The
** Python side calls what never parks through cffi on a typed view of it,
** ffi.from_buffer("px_mutex *", handle): the buffer a handle exports is the C
** object's address with no bytes (nothing reads or writes through the buffer),
** and the view keeps the handle alive.  So no address is ever a Python int, and
** the op a wait makes is checked against the kind of object it is given: a wrong
** pairing raises TypeError instead of calling C with the wrong object.  Both
** hand their object to the collector's rule of bindings/host (pxhost_collect:
** freed now, or kept while busy and freed when a run of the thread ends) when
** they are deallocated -- a Prim only once Python called its collect()
** (_Primitive.__del__ in _sync.py decides whether) -- so after every finalizer
** of a reference cycle they are in ran.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "_host.h"
#include "pxhost.h"

typedef struct {
    PyObject_HEAD
    void *p;                 /* the C object */
    int kind;                /* PXH_K_* */
    int collect;             /* collect() was called: collected at dealloc */
    uintptr_t slot;          /* what the last Channel recv through wait() got */
} pxh_prim;

/* The kind of object each op takes (PXH_JOIN: a fiber's capsule). */
static const int op_kind[PXH_NOPS] = {
    [PXH_MUTEX_LOCK] = PXH_K_MUTEX,   [PXH_MUTEX_UNLOCK] = PXH_K_MUTEX,
    [PXH_RDLOCK] = PXH_K_RWLOCK,      [PXH_WRLOCK] = PXH_K_RWLOCK,
    [PXH_WG_WAIT] = PXH_K_WAITGROUP,  [PXH_ARRIVE] = PXH_K_BARRIER,
    [PXH_ONCE_BEGIN] = PXH_K_ONCE,    [PXH_SEM_ACQUIRE] = PXH_K_SEM,
    [PXH_EVENT_WAIT] = PXH_K_EVENT,   [PXH_CHAN_SEND] = PXH_K_CHAN,
    [PXH_CHAN_RECV] = PXH_K_CHAN,     [PXH_JOIN] = -1,
    [PXH_FUTURE_WAIT] = PXH_K_FUTURE, [PXH_GROUP_WAIT] = PXH_K_GROUP,
};

static void *make(int kind, size_t n)
{
    switch (kind) {
    case PXH_K_MUTEX: return px_mutex_new();
    case PXH_K_RWLOCK: return px_rwlock_new();
    case PXH_K_WAITGROUP: return px_waitgroup_new();
    case PXH_K_BARRIER: return px_barrier_new(n);
    case PXH_K_ONCE: return px_once_new();
    case PXH_K_SEM: return px_sem_new(n);
    case PXH_K_EVENT: return px_event_new();
    case PXH_K_CHAN: return px_chan_new(n);
    case PXH_K_FUTURE: return px_future_new();
    case PXH_K_GROUP: return px_group_new();     /* NULL off-fiber: checked before */
    }
    return NULL;
}

/* Each kind's px_*_free as the collector's pxhost_free_fn. */
#define FREE_AS(kind, fn) static int free_##kind(void *p) { return fn(p); }
FREE_AS(mutex, px_mutex_free)
FREE_AS(rwlock, px_rwlock_free)
FREE_AS(waitgroup, px_waitgroup_free)
FREE_AS(barrier, px_barrier_free)
FREE_AS(once, px_once_free)
FREE_AS(sem, px_sem_free)
FREE_AS(event, px_event_free)
FREE_AS(chan, px_chan_free)
FREE_AS(future, px_future_free)
FREE_AS(group, px_group_free)
#undef FREE_AS

static const pxhost_free_fn free_of[PXH_NKINDS] = {
    [PXH_K_MUTEX] = free_mutex,       [PXH_K_RWLOCK] = free_rwlock,
    [PXH_K_WAITGROUP] = free_waitgroup, [PXH_K_BARRIER] = free_barrier,
    [PXH_K_ONCE] = free_once,         [PXH_K_SEM] = free_sem,
    [PXH_K_EVENT] = free_event,       [PXH_K_CHAN] = free_chan,
    [PXH_K_FUTURE] = free_future,     [PXH_K_GROUP] = free_group,
};

static PyObject *prim_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    int kind;
    Py_ssize_t n = 0;
    if (kw != NULL && PyDict_GET_SIZE(kw) != 0) {
        PyErr_SetString(PyExc_TypeError, "Prim(kind, n=0) takes no keywords");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "i|n", &kind, &n))
        return NULL;
    if (kind < 0 || kind >= PXH_NKINDS || n < 0) {
        PyErr_SetString(PyExc_ValueError, "Prim: no such kind, or n < 0");
        return NULL;
    }
    pxh_prim *o = (pxh_prim *)type->tp_alloc(type, 0);
    if (o == NULL)
        return NULL;
    o->kind = kind;
    o->p = make(kind, (size_t)n);
    if (o->p == NULL) {
        Py_DECREF(o);
        return PyErr_NoMemory();
    }
    return (PyObject *)o;
}

/* The buffer cffi's from_buffer views: the object's address, no bytes. */
static int prim_getbuffer(pxh_prim *o, Py_buffer *view, int flags)
{
    return PyBuffer_FillInfo(view, (PyObject *)o, o->p, 0, 0, flags);
}

static PyBufferProcs prim_buffer = { (getbufferproc)prim_getbuffer, NULL };

static PyObject *prim_slot(pxh_prim *o, void *closure)
{
    (void)closure;
    return PyLong_FromSize_t(o->slot);
}

/* collect(): the object is Python's no more; when this handle is deallocated
** it is freed, or kept while fibers hold it or wait on it (pxhost_collect).
** Not now: collect() comes from a __del__, and the collector may run the
** other finalizers of the same reference cycle after it, which may still use
** the object (the handle, not tracked by the collector, outlives them all).
** Without collect() the object is left allocated. */
static PyObject *prim_collect(pxh_prim *o, PyObject *unused)
{
    (void)unused;
    o->collect = 1;
    Py_RETURN_NONE;
}

static void prim_dealloc(pxh_prim *o)
{
    if (o->collect)
        pxhost_collect(free_of[o->kind], o->p, 0);  /* NULL does nothing */
    Py_TYPE(o)->tp_free((PyObject *)o);
}

static PyMethodDef prim_methods[] = {
    { "collect", (PyCFunction)prim_collect, METH_NOARGS,
      "collect(): once this handle is deallocated, frees the C object, or keeps it while it "
      "is busy and frees it when a run of that thread ends." },
    { NULL, NULL, 0, NULL },
};

static PyGetSetDef prim_getset[] = {
    { "slot", (getter)prim_slot, NULL, "what the last recv through wait() received", NULL },
    { NULL, NULL, NULL, NULL, NULL },
};

static PyTypeObject prim_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "parataxis._host.Prim",
    .tp_basicsize = sizeof(pxh_prim),
    .tp_dealloc = (destructor)prim_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Prim(kind, n=0): a sync object's C memory, made here, handed back by "
              "collect() (see _handles.c).",
    .tp_as_buffer = &prim_buffer,
    .tp_methods = prim_methods,
    .tp_getset = prim_getset,
    .tp_new = prim_new,
};

int pxh_op_target(int op, PyObject *obj, PyObject *value, pxh_op *w)
{
    if (op < 0 || op >= PXH_NOPS) {
        PyErr_SetString(PyExc_ValueError, "wait: no such op");
        return -1;
    }
    w->op = op;
    w->out = NULL;
    if (op == PXH_JOIN && !PyCapsule_CheckExact(obj)) {
        PyErr_SetString(PyExc_TypeError, "wait(JOIN, ...): not a spawn handle");
        return -1;
    }
    if (op == PXH_JOIN) {   /* ValueError once released: see h_release */
        w->obj = PyCapsule_GetPointer(obj, PXH_FIBER_CAPSULE);
        return w->obj == NULL ? -1 : 0;
    }
    pxh_prim *o = (pxh_prim *)obj;
    if (!Py_IS_TYPE(obj, &prim_type) || o->kind != op_kind[op] || o->p == NULL) {
        PyErr_SetString(PyExc_TypeError, "wait: not a live Prim of the op's kind");
        return -1;
    }
    w->obj = o->p;
    if (op == PXH_CHAN_RECV) {
        w->out = &o->slot;
    } else if (op == PXH_CHAN_SEND) {
        /* The value is Channel's key for it (an int), carried as the void *. */
        size_t key = value == NULL ? 0 : PyLong_AsSize_t(value);
        if (key == (size_t)-1 && PyErr_Occurred())
            return -1;
        w->out = (void *)(uintptr_t)key;
    }
    return 0;
}

void *pxh_prim_ptr(PyObject *obj, int kind)
{
    pxh_prim *o = (pxh_prim *)obj;
    if (!Py_IS_TYPE(obj, &prim_type) || o->kind != kind || o->p == NULL) {
        PyErr_SetString(PyExc_TypeError, "not a live Prim of the call's kind");
        return NULL;
    }
    return o->p;
}

int pxh_op_call(pxh_op *w)
{
    void *p = w->obj;
    switch (w->op) {
    case PXH_MUTEX_LOCK: return px_mutex_lock(p);
    case PXH_MUTEX_UNLOCK: return px_mutex_unlock(p);
    case PXH_RDLOCK: return px_rwlock_rdlock(p);
    case PXH_WRLOCK: return px_rwlock_wrlock(p);
    case PXH_WG_WAIT: return px_waitgroup_wait(p);
    case PXH_ARRIVE: return px_barrier_arrive_and_wait(p);
    case PXH_ONCE_BEGIN: return px_once_begin(p);
    case PXH_SEM_ACQUIRE: return px_sem_acquire(p);
    case PXH_EVENT_WAIT: return px_event_wait(p);
    case PXH_CHAN_SEND: return px_chan_send(p, w->out);
    case PXH_CHAN_RECV: {
        void *v = NULL;
        int rc = px_chan_recv(p, &v);
        if (rc == 0)
            *(uintptr_t *)w->out = (uintptr_t)v;
        return rc;
    }
    case PXH_JOIN: return px_join(p, NULL);
    case PXH_FUTURE_WAIT: return px_future_wait(p, NULL);
    case PXH_GROUP_WAIT: return px_group_wait(p);
    }
    return PX_EINVAL;
}

/*
** Token: a px_token, collected when this object is deallocated -- what
** CancellationToken (_fibers.py) holds.  During a run of this thread a scope
** of the run may still use it, which no free can check: it is freed when the
** run ends (pxhost_collect's `later`).  The garbage collector does not track
** it, so it is freed only once the objects that hold it are deallocated, after
** every finalizer of their reference cycle ran: a finalizer in the cycle may
** still cancel or read the token.  An ffi.gc object would be a finalizer
** itself, which the collector may run first.
*/
typedef struct {
    PyObject_HEAD
    px_token *t;
    int unscoped;            /* unscoped(): no scope can use it any more */
} pxh_token;

static PyObject *token_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    if (PyTuple_GET_SIZE(args) != 0 || (kw != NULL && PyDict_GET_SIZE(kw) != 0)) {
        PyErr_SetString(PyExc_TypeError, "Token() takes no arguments");
        return NULL;
    }
    pxh_token *o = (pxh_token *)type->tp_alloc(type, 0);
    if (o == NULL)
        return NULL;
    o->t = px_token_new();
    if (o->t == NULL) {
        Py_DECREF(o);
        return PyErr_NoMemory();
    }
    return (PyObject *)o;
}

static int free_token(void *p)
{
    px_token_free(p);
    return 0;
}

static void token_dealloc(pxh_token *o)
{
    pxhost_collect(free_token, o->t, !o->unscoped && pxh_in_run());   /* NULL does nothing */
    Py_TYPE(o)->tp_free((PyObject *)o);
}

/* unscoped(): the owner knows that every scope of the token was closed (a
** px.group's, once its block exited): freed at deallocation, not at the end
** of the run -- a run making groups by the million keeps none of them. */
static PyObject *token_unscoped(pxh_token *o, PyObject *unused)
{
    (void)unused;
    o->unscoped = 1;
    Py_RETURN_NONE;
}

static PyMethodDef token_methods[] = {
    { "unscoped", (PyCFunction)token_unscoped, METH_NOARGS,
      "unscoped(): no scope uses the token any more: freed at deallocation, even during a "
      "run." },
    { NULL, NULL, 0, NULL },
};

static int token_getbuffer(pxh_token *o, Py_buffer *view, int flags)
{
    return PyBuffer_FillInfo(view, (PyObject *)o, o->t, 0, 0, flags);
}

static PyBufferProcs token_buffer = { (getbufferproc)token_getbuffer, NULL };

static PyTypeObject token_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "parataxis._host.Token",
    .tp_basicsize = sizeof(pxh_token),
    .tp_dealloc = (destructor)token_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A px_token, freed at deallocation (see _handles.c).",
    .tp_as_buffer = &token_buffer,
    .tp_methods = token_methods,
    .tp_new = token_new,
};

/*
** select(cases) -> (index, result, value): px_select over `cases`, a sequence
** of (kind, obj, a, b) -- kind PX_SELECT_*; obj a live Prim of the case's
** kind (a Channel for SEND and RECV, an Event, a Semaphore) or None, which
** switches the case off (it never fires); a: a SEND's key, an FD's fd, a
** DEADLINE's deadline (ns on px_now()'s clock); b: an FD's events.  While
** px_select returns PX_EYIELD the fiber waits for its turn and calls it again
** with the same cases (a hosted fiber collects its outcome so), which live on
** the heap until then.  Returns the index of the case that fired, its result
** (0 or PX_ECLOSED) and what a RECV received (a Channel's key, else 0); or
** (rc, 0, 0) with rc < 0, px_select's error.
*/
static int select_case(PyObject *t, px_select_case *k)
{
    static const int prim_of[] = {
        [PX_SELECT_SEND] = PXH_K_CHAN, [PX_SELECT_RECV] = PXH_K_CHAN,
        [PX_SELECT_EVENT] = PXH_K_EVENT, [PX_SELECT_SEM] = PXH_K_SEM,
    };
    Py_ssize_t n = PyTuple_Check(t) ? PyTuple_GET_SIZE(t) : 0;
    if (n < 2 || n > 4) {
        PyErr_SetString(PyExc_TypeError, "select: a case is (kind, obj[, a[, b]])");
        return -1;
    }
    /* Read directly: PyArg_ParseTuple costs more than the rest of a case. */
    long kind = PyLong_AsLong(PyTuple_GET_ITEM(t, 0));
    long long a = n > 2 ? PyLong_AsLongLong(PyTuple_GET_ITEM(t, 2)) : 0;
    unsigned long b = n > 3 ? PyLong_AsUnsignedLong(PyTuple_GET_ITEM(t, 3)) : 0;
    if (PyErr_Occurred())
        return -1;
    if (kind < INT_MIN || kind > INT_MAX || b > UINT_MAX) {
        PyErr_SetString(PyExc_OverflowError, "select: a case's kind or events out of range");
        return -1;
    }
    PyObject *obj = PyTuple_GET_ITEM(t, 1);
    k->kind = (int)kind;
    k->events = (unsigned)b;
    switch (k->kind) {
    case PX_SELECT_SEND: case PX_SELECT_RECV: case PX_SELECT_EVENT: case PX_SELECT_SEM:
        if (obj == Py_None)
            break;
        if (!Py_IS_TYPE(obj, &prim_type) || ((pxh_prim *)obj)->kind != prim_of[k->kind]
            || ((pxh_prim *)obj)->p == NULL) {
            PyErr_SetString(PyExc_TypeError, "select: not a live Prim of the case's kind");
            return -1;
        }
        k->obj = ((pxh_prim *)obj)->p;
        if (k->kind == PX_SELECT_SEND)
            k->value = (void *)(uintptr_t)a;
        break;
    case PX_SELECT_FD:
        if (a < INT32_MIN || a > INT32_MAX) {
            PyErr_SetString(PyExc_OverflowError, "select: fd out of range");
            return -1;
        }
        k->fd = (int)a;
        break;
    case PX_SELECT_DEADLINE:
        k->deadline = a;
        break;
    default:                 /* DEFAULT, or a kind px_select refuses (PX_EINVAL) */
        break;
    }
    return 0;
}

static PyObject *h_select(PyObject *self, PyObject *arg)
{
    (void)self;
    PyObject *seq = PySequence_Fast(arg, "select(cases): a sequence of cases");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    px_select_case one[4], *cases = one;
    if ((size_t)n > sizeof one / sizeof one[0]
        && (cases = PyMem_Calloc((size_t)n, sizeof *cases)) == NULL) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    if (cases == one)
        memset(one, 0, sizeof one);
    PyObject *out = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (select_case(PySequence_Fast_GET_ITEM(seq, i), &cases[i]) != 0)
            goto done;
    }
    /* The cases live in this frame (or on the heap) while the fiber waits:
    ** px_select keeps them by address, and a greenlet's stack comes back to
    ** the same addresses when it is switched back. */
    int rc;
    while ((rc = px_select(cases, (size_t)n)) == PX_EYIELD) {
        if (!pxh_in_run()) {
            PyErr_SetString(PyExc_SystemError, "select: PX_EYIELD off a run");
            goto done;
        }
        if (pxh_pass_turn() < 0)
            goto done;
    }
    if (rc < 0)
        out = Py_BuildValue("(iii)", rc, 0, 0);
    else
        out = Py_BuildValue("(iin)", rc, cases[rc].result,
                            cases[rc].kind == PX_SELECT_RECV && cases[rc].result == 0
                                ? (Py_ssize_t)(uintptr_t)cases[rc].value : (Py_ssize_t)0);
done:
    if (cases != one)
        PyMem_Free(cases);
    Py_DECREF(seq);
    return out;
}

/*
** wait_futures(futures, any) -> int: px_future_wait_all (any false) or
** px_future_wait_any (any true) over `futures`, a sequence of Prims of
** futures, waiting for the turn while it parks and calling again with the
** same array (on the heap until then).  Returns the call's outcome: wait_all's
** 0 or the first failure's status, wait_any's index, or a C error code.
*/
static PyObject *h_wait_futures(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "wait_futures(futures, any)");
        return NULL;
    }
    int any = PyObject_IsTrue(args[1]);
    if (any < 0)
        return NULL;
    PyObject *seq = PySequence_Fast(args[0], "wait_futures: a sequence of futures");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    px_future **fus = PyMem_Calloc(n > 0 ? (size_t)n : 1, sizeof *fus);
    PyObject *out = NULL;
    if (fus == NULL) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if ((fus[i] = pxh_prim_ptr(PySequence_Fast_GET_ITEM(seq, i), PXH_K_FUTURE)) == NULL)
            goto done;
    }
    int rc;
    while ((rc = any ? px_future_wait_any(fus, (size_t)n)
                     : px_future_wait_all(fus, (size_t)n, NULL)) == PX_EYIELD) {
        if (!pxh_in_run()) {
            PyErr_SetString(PyExc_SystemError, "wait_futures: PX_EYIELD off a run");
            goto done;
        }
        if (pxh_pass_turn() < 0)
            goto done;
    }
    out = PyLong_FromLong(rc);
done:
    PyMem_Free(fus);
    Py_DECREF(seq);
    return out;
}

static PyMethodDef handle_methods[] = {
    { "wait_futures", (PyCFunction)(void (*)(void))h_wait_futures, METH_FASTCALL,
      "wait_futures(futures, any) -> int: px_future_wait_all or px_future_wait_any, waiting "
      "for the turn while it parks (see _handles.c)." },
    { "select", h_select, METH_O,
      "select(cases) -> (index, result, value): px_select, waiting for the turn while it "
      "parks (see _handles.c)." },
    { NULL, NULL, 0, NULL },
};

int pxh_add_handles(PyObject *m)
{
    static const struct { const char *name; int value; } names[] = {
        { "MUTEX_LOCK", PXH_MUTEX_LOCK }, { "MUTEX_UNLOCK", PXH_MUTEX_UNLOCK },
        { "RDLOCK", PXH_RDLOCK }, { "WRLOCK", PXH_WRLOCK }, { "WG_WAIT", PXH_WG_WAIT },
        { "ARRIVE", PXH_ARRIVE }, { "ONCE_BEGIN", PXH_ONCE_BEGIN },
        { "SEM_ACQUIRE", PXH_SEM_ACQUIRE }, { "EVENT_WAIT", PXH_EVENT_WAIT },
        { "CHAN_SEND", PXH_CHAN_SEND }, { "CHAN_RECV", PXH_CHAN_RECV }, { "JOIN", PXH_JOIN },
        { "FUTURE_WAIT", PXH_FUTURE_WAIT }, { "GROUP_WAIT", PXH_GROUP_WAIT },
        { "K_FUTURE", PXH_K_FUTURE }, { "K_GROUP", PXH_K_GROUP },
        { "K_MUTEX", PXH_K_MUTEX }, { "K_RWLOCK", PXH_K_RWLOCK },
        { "K_WAITGROUP", PXH_K_WAITGROUP }, { "K_BARRIER", PXH_K_BARRIER },
        { "K_ONCE", PXH_K_ONCE }, { "K_SEM", PXH_K_SEM }, { "K_EVENT", PXH_K_EVENT },
        { "K_CHAN", PXH_K_CHAN },
        { "SELECT_SEND", PX_SELECT_SEND }, { "SELECT_RECV", PX_SELECT_RECV },
        { "SELECT_EVENT", PX_SELECT_EVENT }, { "SELECT_SEM", PX_SELECT_SEM },
        { "SELECT_FD", PX_SELECT_FD }, { "SELECT_DEADLINE", PX_SELECT_DEADLINE },
        { "SELECT_DEFAULT", PX_SELECT_DEFAULT },
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (PyModule_AddIntConstant(m, names[i].name, names[i].value) != 0)
            return -1;
    }
    if (PyType_Ready(&prim_type) != 0 || PyType_Ready(&token_type) != 0
        || PyModule_AddFunctions(m, handle_methods) != 0)
        return -1;
    if (PyModule_AddObjectRef(m, "Prim", (PyObject *)&prim_type) != 0)
        return -1;
    return PyModule_AddObjectRef(m, "Token", (PyObject *)&token_type);
}
