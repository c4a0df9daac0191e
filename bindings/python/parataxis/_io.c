/*
** _io.c -- part of parataxis._host: a fiber's waits on file descriptors, the
** socket calls that wait through them (recv, recv_into, send, sendall: the
** calls of every request, so here in C, where an fd that is not ready costs no
** Python exception), and run_blocking on the C pool.
**
** A call is tried first and waits only when it would block (EAGAIN), then is
** tried again: readiness, as the C calls do (px_recv...), so a wait that a
** scope ends leaves nothing in flight.  The fd must be non-blocking, or the
** call passes MSG_DONTWAIT.  A wait is px_wait_fd on a fiber (PX_EYIELD: the
** fiber passes its turn, then makes the same wait again, which collects the
** outcome), and poll(2) without the GIL off-fiber, where a socket of the
** package behaves as a blocking one does.
**
** A socket's own timeout (settimeout) is a deadline scope pushed around its
** waits and popped before the call returns, so that it ends as the standard
** socket's does: TimeoutError("timed out"), not the scopes' px.Timeout.
*/
#include "_host.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* An await_fd outcome beside the C codes: the call's own timeout passed. */
#define TIMED_OUT INT_MIN
/* An await_fd outcome: an exception is set (a failed switch, a signal's). */
#define RAISED (INT_MIN + 1)

static PyObject *raise_fd;   /* Python: _errors.raise_fd(code, fd, events) */

/* off-fiber: poll(2) on the thread, the GIL released, until `deadline`. */
static int await_off_fiber(int fd, unsigned events, int64_t deadline)
{
    struct pollfd p = { .fd = fd, .events = 0 };
    if (events & PX_READABLE)
        p.events |= POLLIN;
    if (events & PX_WRITABLE)
        p.events |= POLLOUT;
    for (;;) {
        int ms = -1;
        if (deadline >= 0) {
            int64_t left = deadline - px_now();
            if (left <= 0)
                return TIMED_OUT;
            ms = left / 1000000 >= INT_MAX ? INT_MAX : (int)((left + 999999) / 1000000);
        }
        int n, err;
        Py_BEGIN_ALLOW_THREADS
        n = poll(&p, 1, ms);
        err = errno;
        Py_END_ALLOW_THREADS
        if (n > 0)
            return 0;   /* ready, or POLLNVAL/POLLERR: the call says what */
        if (n < 0 && err != EINTR) {
            errno = err;
            PyErr_SetFromErrno(PyExc_OSError);
            return RAISED;
        }
        if (n < 0 && PyErr_CheckSignals() < 0)
            return RAISED;
    }
}

/* On a fiber: px_wait_fd within a deadline scope when `deadline` >= 0. */
static int await_on_fiber(int fd, unsigned events, int64_t deadline)
{
    int rc;
    if (deadline >= 0 && (rc = px_scope_push_deadline(deadline)) != 0)
        return rc;
    while ((rc = px_wait_fd(fd, events)) == PX_EYIELD) {
        if (pxh_pass_turn() < 0) {
            rc = RAISED;
            break;
        }
    }
    if (deadline >= 0 && px_scope_pop() != 0 && rc == PX_ETIMEDOUT)
        rc = TIMED_OUT;   /* the innermost scope that fired is ours */
    return rc;
}

/* Waits until fd is ready for `events` or `deadline` passes (-1: never):
** 0, TIMED_OUT, RAISED, or a C code of the wait.  Off-fiber it polls when
** `poll_off_fiber`, else gives PX_ENOFIBER. */
static int await_fd(int fd, unsigned events, int64_t deadline, int poll_off_fiber)
{
    if (px_self() == 0)
        return poll_off_fiber ? await_off_fiber(fd, events, deadline) : PX_ENOFIBER;
    return await_on_fiber(fd, events, deadline);
}

/* Raises the exception of await_fd's outcome rc (not 0); returns NULL. */
static PyObject *raise_wait(int rc, int fd, unsigned events)
{
    if (rc == RAISED)
        return NULL;
    if (rc == TIMED_OUT) {
        PyErr_SetString(PyExc_TimeoutError, "timed out");
        return NULL;
    }
    PyObject *r = PyObject_CallFunction(raise_fd, "iiI", rc, fd, events);
    Py_XDECREF(r);
    if (!PyErr_Occurred())
        PyErr_Format(PyExc_SystemError, "parataxis: no exception for code %d", rc);
    return NULL;
}

/* A timeout in ns (-1: none, 0: never wait) as a deadline, taken at the
** first wait, so that sendall's timeout bounds the whole call. */
static int64_t deadline_of(int64_t timeout_ns)
{
    if (timeout_ns < 0)
        return -1;
    int64_t now = px_now();
    return timeout_ns > INT64_MAX - now ? INT64_MAX : now + timeout_ns;
}

/* One try of a call: its result, or -1 with errno. */
typedef Py_ssize_t (*try_fn)(int fd, void *buf, size_t n, int flags);

static Py_ssize_t try_recv(int fd, void *buf, size_t n, int flags)
{
    return recv(fd, buf, n, flags | MSG_DONTWAIT);
}

static Py_ssize_t try_send(int fd, void *buf, size_t n, int flags)
{
    return send(fd, buf, n, flags | MSG_DONTWAIT | MSG_NOSIGNAL);
}

static int int_of(PyObject *o, int *out);
static PyObject *str_fileno, *str_px_ns;   /* "fileno", "_px_ns" */

/* Whether socket `sock` still has `fd` after a wait: 1, 0 (it was closed
** meanwhile), or -1 with an exception set. */
static int still_has(PyObject *sock, int fd)
{
    int now;
    PyObject *v = PyObject_CallMethodNoArgs(sock, str_fileno);
    if (v == NULL || int_of(v, &now) != 0) {
        Py_XDECREF(v);
        return -1;
    }
    Py_DECREF(v);
    return now == fd;
}

/* Waits until socket `sock`'s fd is ready for `events`, bounded by *deadline
** (-2: not taken yet, from timeout_ns): 0, or -1 with the wait's exception
** set.  Then the fd is asked for again, as the standard socket does: a fiber
** woken for readiness may get its turn after another closed the socket, and
** a new socket may have its fd number by then (notify_closing wakes only a
** fiber still waiting) -- that is ClosedResourceError, not a call on the new
** socket. */
static int wait_ready(PyObject *sock, int fd, unsigned events, int64_t timeout_ns,
                      int64_t *deadline)
{
    if (*deadline == -2)
        *deadline = deadline_of(timeout_ns);
    int rc = await_fd(fd, events, *deadline, 1);
    if (rc == 0) {
        int same = still_has(sock, fd);
        if (same < 0)
            return -1;
        rc = same ? 0 : PX_ECLOSED;
    }
    if (rc == 0)
        return 0;
    raise_wait(rc, fd, events);
    return -1;
}

/* Returned by io_loop told not to wait, when the call would block. */
#define WOULD_BLOCK (-2)

/*
** Makes the call on `sock`'s fd until it does not say EAGAIN, waiting for
** `events` in between (unless not `wait`: then WOULD_BLOCK, no exception
** set), bounded by *deadline (see wait_ready).  Returns its result, or -1
** with an exception set: OSError of the call's errno (BlockingIOError with a
** timeout of 0, as a non-blocking socket's), or the wait's.
*/
static Py_ssize_t io_loop(try_fn call, PyObject *sock, int fd, void *buf, size_t n, int flags,
                          unsigned events, int wait, int64_t timeout_ns, int64_t *deadline)
{
    for (;;) {
        Py_ssize_t got = call(fd, buf, n, flags);
        if (got >= 0)
            return got;
        if (errno == EINTR) {
            if (PyErr_CheckSignals() < 0)
                return -1;
            continue;
        }
        if ((errno != EAGAIN && errno != EWOULDBLOCK) || timeout_ns == 0) {
            PyErr_SetFromErrno(PyExc_OSError);
            return -1;
        }
        if (!wait)
            return WOULD_BLOCK;
        if (wait_ready(sock, fd, events, timeout_ns, deadline) != 0)
            return -1;
    }
}

/* -- the module's functions ------------------------------------------------- */

/* The C int of Python int `o` into *out: 0, or -1 with OverflowError or
** TypeError set. */
static int int_of(PyObject *o, int *out)
{
    long v = PyLong_AsLong(o);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (v < INT_MIN || v > INT_MAX) {
        PyErr_SetString(PyExc_OverflowError, "parataxis: a C int is out of range");
        return -1;
    }
    *out = (int)v;
    return 0;
}

/*
** A socket method's arguments: args[0] is the socket (px.socket), then up to
** max - 1 of the user's, the first `min` - 1 required, each int among them
** into nums[i] (default 0; a NULL slot for one that is not an int), the others
** into objs[i]; keywords by `names`.  A number is a Py_ssize_t, as the
** standard socket's sizes are; "flags" must fit a C int.  *fd is the socket's
** fileno(), *timeout_ns its _px_ns (-1: none).  0, or -1 with an exception set.
*/
static int method_args(const char *name, PyObject *const *args, Py_ssize_t nargs,
                       PyObject *kwnames, int min, int max, const char *const names[],
                       Py_ssize_t *nums[], PyObject **objs, int *fd, int64_t *timeout_ns)
{
    PyObject *given[4] = { NULL, NULL, NULL, NULL };
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    if (nargs < 1 || nargs > max) {
        PyErr_Format(PyExc_TypeError, "%s() takes at most %d arguments", name, max - 1);
        return -1;
    }
    for (Py_ssize_t i = 0; i < nargs; i++)
        given[i] = args[i];
    for (Py_ssize_t k = 0; k < nkw; k++) {
        int i = 1;
        while (i < max
               && PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, k), names[i]) != 0)
            i++;
        if (i == max || given[i] != NULL) {
            PyErr_Format(PyExc_TypeError, "%s(): unexpected or repeated keyword %R", name,
                         PyTuple_GET_ITEM(kwnames, k));
            return -1;
        }
        given[i] = args[nargs + k];
    }
    for (int i = 1; i < max; i++) {
        if (given[i] == NULL && i < min) {
            PyErr_Format(PyExc_TypeError, "%s() missing argument '%s'", name, names[i]);
            return -1;
        }
        if (nums[i] != NULL)
            *nums[i] = 0;
        if (given[i] == NULL)
            continue;
        if (nums[i] == NULL) {
            *objs = given[i];
            continue;
        }
        int flags;
        if ((*nums[i] = PyNumber_AsSsize_t(given[i], PyExc_OverflowError)) == -1
            && PyErr_Occurred())
            return -1;
        if (strcmp(names[i], "flags") == 0 && int_of(given[i], &flags) != 0)
            return -1;
    }
    PyObject *v = PyObject_CallMethodNoArgs(args[0], str_fileno);
    if (v == NULL || int_of(v, fd) != 0) {
        Py_XDECREF(v);
        return -1;
    }
    Py_DECREF(v);
    if ((v = PyObject_GetAttr(args[0], str_px_ns)) == NULL)
        return -1;
    long long t = PyLong_AsLongLong(v);
    Py_DECREF(v);
    if (t == -1 && PyErr_Occurred())
        return -1;
    *timeout_ns = t;
    return 0;
}

PyDoc_STRVAR(wait_fd_doc, "wait_fd(fd, events, timeout_ns) -> None: parks the calling fiber until "
                          "fd is ready for events (READABLE, WRITABLE or both) or timeout_ns "
                          "passes (-1: never), which raises TimeoutError.  Other outcomes raise "
                          "through _errors.raise_fd; off-fiber, NoFiberError.");

static PyObject *h_wait_fd(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    int fd, events;
    long long timeout_ns;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "wait_fd(fd, events, timeout_ns)");
        return NULL;
    }
    if (int_of(args[0], &fd) != 0 || int_of(args[1], &events) != 0)
        return NULL;
    if ((timeout_ns = PyLong_AsLongLong(args[2])) == -1 && PyErr_Occurred())
        return NULL;
    int rc = await_fd(fd, (unsigned)events, deadline_of(timeout_ns), 0);
    return rc == 0 ? Py_NewRef(Py_None) : raise_wait(rc, fd, (unsigned)events);
}

/*
** The socket methods of every request, bound to px.socket as instance methods
** (add_socket_methods): self's fileno() is the fd, its _px_ns the timeout in ns
** (-1: none, 0: never wait).
*/

PyDoc_STRVAR(recv_doc, "recv(bufsize[, flags]) -> bytes: at most bufsize bytes, as soon as "
                       "there are any; b'' at the end of the stream.");

static PyObject *h_recv(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                        PyObject *kwnames)
{
    (void)self;
    static const char *const names[] = { "self", "bufsize", "flags" };
    int fd;
    Py_ssize_t n, flags;
    int64_t timeout_ns, deadline = -2;
    if (method_args("recv", args, nargs, kwnames, 2, 3, names,
                    (Py_ssize_t *[]){ NULL, &n, &flags }, NULL, &fd, &timeout_ns) != 0)
        return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "negative buffersize in recv");
        return NULL;
    }
    /* The bytes are made for each try and dropped before a wait, so that a
    ** parked reader holds no buffer (recv(65536) on 10,000 idle sockets). */
    PyObject *b;
    Py_ssize_t got;
    for (;;) {
        if ((b = PyBytes_FromStringAndSize(NULL, n)) == NULL)
            return NULL;
        got = io_loop(try_recv, args[0], fd, PyBytes_AS_STRING(b), (size_t)n, (int)flags,
                      PX_READABLE, 0, timeout_ns, &deadline);
        if (got >= 0)
            break;
        Py_DECREF(b);
        if (got != WOULD_BLOCK || wait_ready(args[0], fd, PX_READABLE, timeout_ns, &deadline) != 0)
            return NULL;
    }
    /* With MSG_TRUNC, recv(2) says a datagram's whole length, past the n
    ** bytes it stored: the rest of a longer object would be uninitialised. */
    if (got > n)
        got = n;
    if (got != n && _PyBytes_Resize(&b, got) != 0)
        return NULL;
    return b;
}

PyDoc_STRVAR(recv_into_doc, "recv_into(buffer[, nbytes[, flags]]) -> int: receives into a "
                            "writable buffer, at most nbytes (0: its size); the count.");

static PyObject *h_recv_into(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames)
{
    (void)self;
    static const char *const names[] = { "self", "buffer", "nbytes", "flags" };
    int fd;
    Py_ssize_t n, flags;
    int64_t timeout_ns, deadline = -2;
    PyObject *buffer = NULL;
    if (method_args("recv_into", args, nargs, kwnames, 2, 4, names,
                    (Py_ssize_t *[]){ NULL, NULL, &n, &flags }, &buffer, &fd, &timeout_ns) != 0)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(buffer, &view, PyBUF_WRITABLE) != 0) {
        /* A read-only buffer is a BufferError here, a TypeError in the
        ** standard recv_into, which a caller may catch. */
        if (PyErr_ExceptionMatches(PyExc_BufferError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "recv_into() argument 'buffer' must be read-write "
                         "bytes-like object, not %.100s", Py_TYPE(buffer)->tp_name);
        }
        return NULL;
    }
    Py_ssize_t got = -1;
    if (n < 0)
        PyErr_SetString(PyExc_ValueError, "negative buffersize in recv_into");
    else if (n > view.len)
        PyErr_SetString(PyExc_ValueError, "buffer too small for requested bytes");
    else
        got = io_loop(try_recv, args[0], fd, view.buf, (size_t)(n == 0 ? view.len : n),
                      (int)flags, PX_READABLE, 1, timeout_ns, &deadline);
    PyBuffer_Release(&view);
    return got < 0 ? NULL : PyLong_FromSsize_t(got);
}

static const char *const send_names[] = { "self", "data", "flags" };

/* send's and sendall's arguments (see method_args), and their data's buffer
** in *view: 0, or -1 with an exception set. */
static int send_args(const char *name, PyObject *const *args, Py_ssize_t nargs,
                     PyObject *kwnames, int *fd, int *flags, int64_t *timeout_ns,
                     Py_buffer *view)
{
    Py_ssize_t f;
    PyObject *data = NULL;
    if (method_args(name, args, nargs, kwnames, 2, 3, send_names,
                    (Py_ssize_t *[]){ NULL, NULL, &f }, &data, fd, timeout_ns) != 0)
        return -1;
    *flags = (int)f;   /* method_args checked that it fits */
    return PyObject_GetBuffer(data, view, PyBUF_SIMPLE);
}

PyDoc_STRVAR(send_doc, "send(data[, flags]) -> int: sends what there is room for, waiting "
                       "while there is none; the count sent.");

static PyObject *h_send(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                        PyObject *kwnames)
{
    (void)self;
    int fd, flags;
    int64_t timeout_ns, deadline = -2;
    Py_buffer view;
    if (send_args("send", args, nargs, kwnames, &fd, &flags, &timeout_ns, &view) != 0)
        return NULL;
    Py_ssize_t sent = io_loop(try_send, args[0], fd, view.buf, (size_t)view.len, flags,
                              PX_WRITABLE, 1, timeout_ns, &deadline);
    PyBuffer_Release(&view);
    return sent < 0 ? NULL : PyLong_FromSsize_t(sent);
}

PyDoc_STRVAR(sendall_doc, "sendall(data[, flags]) -> None: sends all of data, waiting whenever "
                          "there is no room; the socket's timeout bounds the whole call.");

static PyObject *h_sendall(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                           PyObject *kwnames)
{
    (void)self;
    int fd, flags;
    int64_t timeout_ns, deadline = -2;
    Py_buffer view;
    if (send_args("sendall", args, nargs, kwnames, &fd, &flags, &timeout_ns, &view) != 0)
        return NULL;
    const char *p = view.buf;
    Py_ssize_t left = view.len, sent = 0;
    while (left > 0) {
        sent = io_loop(try_send, args[0], fd, (void *)p, (size_t)left, flags, PX_WRITABLE, 1,
                       timeout_ns, &deadline);
        if (sent < 0)
            break;
        p += sent;
        left -= sent;
    }
    PyBuffer_Release(&view);
    return sent < 0 ? NULL : Py_NewRef(Py_None);
}

/* -- run_blocking ----------------------------------------------------------- */

/*
** A job of run_blocking: fn(*args) called on a pool thread, which takes the
** GIL for it; its result or exception kept for the fiber.  The job belongs to
** the fiber while px_run_blocking returns 0 or refuses, else to the pool,
** which calls job_release (on the fiber before the return, or on its thread
** when an abandoned fn ends), which takes the GIL to drop it.
*/
typedef struct pxh_job {
    PyObject *fn, *args;
    PyObject *result;            /* fn's return, or NULL */
    PyObject *exc_type, *exc, *exc_tb;   /* what it raised */
} pxh_job;

/* The interpreter is shutting down: a pool thread must not take the GIL. */
static int finalizing(void)
{
#if PY_VERSION_HEX >= 0x030D0000
    return Py_IsFinalizing();
#else
    return _Py_IsFinalizing();
#endif
}

static void *job_call(void *arg)
{
    pxh_job *j = arg;
    if (finalizing())
        return NULL;
    PyGILState_STATE g = PyGILState_Ensure();
    j->result = PyObject_Call(j->fn, j->args, NULL);
    if (j->result == NULL) {
        PyErr_Fetch(&j->exc_type, &j->exc, &j->exc_tb);
        PyErr_NormalizeException(&j->exc_type, &j->exc, &j->exc_tb);
    }
    PyGILState_Release(g);
    return NULL;
}

static void job_free(pxh_job *j)
{
    Py_XDECREF(j->fn);
    Py_XDECREF(j->args);
    Py_XDECREF(j->result);
    Py_XDECREF(j->exc_type);
    Py_XDECREF(j->exc);
    Py_XDECREF(j->exc_tb);
    free(j);
}

static void job_release(void *arg, void *result)
{
    (void)result;
    if (finalizing())
        return;   /* its objects go with the interpreter */
    PyGILState_STATE g = PyGILState_Ensure();
    job_free(arg);
    PyGILState_Release(g);
}

/* The outcome of a job the fiber got back: fn's result, or its exception. */
static PyObject *job_outcome(pxh_job *j)
{
    PyObject *r = j->result;
    j->result = NULL;
    if (r == NULL) {
        PyErr_Restore(j->exc_type, j->exc, j->exc_tb);
        j->exc_type = j->exc = j->exc_tb = NULL;
    }
    job_free(j);
    return r;
}

PyDoc_STRVAR(run_blocking_doc, "run_blocking(fn, args, abandon) -> fn(*args) run on a thread of "
                               "the C pool while the calling fiber parks (px_run_blocking; "
                               "abandon: PX_BLOCKING_ABANDON).  Raises what fn raised, or the "
                               "exception of the call's code.");

static PyObject *h_run_blocking(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *fn, *fargs;
    int abandon;
    if (!PyArg_ParseTuple(args, "OO!p", &fn, &PyTuple_Type, &fargs, &abandon))
        return NULL;
    pxh_job *j = calloc(1, sizeof *j);
    if (j == NULL)
        return PyErr_NoMemory();
    j->fn = Py_NewRef(fn);
    j->args = Py_NewRef(fargs);
    unsigned flags = abandon ? PX_BLOCKING_ABANDON : 0;
    int rc;
    while ((rc = px_run_blocking(job_call, j, job_release, flags, NULL)) == PX_EYIELD) {
        if (pxh_pass_turn() < 0)
            return NULL;   /* the job is the fiber's record's: its end gives it up */
    }
    if (rc == 0)
        return job_outcome(j);
    if (rc != PX_ETIMEDOUT && rc != PX_ECANCELED)
        job_free(j);       /* refused: nothing ran, release is not called */
    return pxh_fail(rc);
}

static PyMethodDef io_functions[] = {
    { "wait_fd", (PyCFunction)(void (*)(void))h_wait_fd, METH_FASTCALL, wait_fd_doc },
    { "run_blocking", h_run_blocking, METH_VARARGS, run_blocking_doc },
    { NULL, NULL, 0, NULL },
};

#define FAST_KW (METH_FASTCALL | METH_KEYWORDS)
static PyMethodDef socket_methods[] = {
    { "recv", (PyCFunction)(void (*)(void))h_recv, FAST_KW, recv_doc },
    { "recv_into", (PyCFunction)(void (*)(void))h_recv_into, FAST_KW, recv_into_doc },
    { "send", (PyCFunction)(void (*)(void))h_send, FAST_KW, send_doc },
    { "sendall", (PyCFunction)(void (*)(void))h_sendall, FAST_KW, sendall_doc },
    { NULL, NULL, 0, NULL },
};

/* Adds each of socket_methods as an instance method -- a C function that a
** class binds to its instances, as a Python function is bound: px.socket
** takes them as its methods, with no Python frame between the call and C. */
static int add_socket_methods(PyObject *m)
{
    for (PyMethodDef *d = socket_methods; d->ml_name != NULL; d++) {
        PyObject *fn = PyCFunction_NewEx(d, NULL, NULL);
        PyObject *method = fn == NULL ? NULL : PyInstanceMethod_New(fn);
        Py_XDECREF(fn);
        char name[32];
        snprintf(name, sizeof name, "socket_%s", d->ml_name);
        int rc = method == NULL ? -1 : PyModule_AddObjectRef(m, name, method);
        Py_XDECREF(method);
        if (rc != 0)
            return -1;
    }
    return 0;
}

int pxh_add_io(PyObject *m, PyObject *errors)
{
    raise_fd = PyObject_GetAttrString(errors, "raise_fd");
    str_fileno = PyUnicode_InternFromString("fileno");
    str_px_ns = PyUnicode_InternFromString("_px_ns");
    if (raise_fd == NULL || str_fileno == NULL || str_px_ns == NULL
        || PyModule_AddFunctions(m, io_functions) != 0 || add_socket_methods(m) != 0)
        return -1;
    if (PyModule_AddIntConstant(m, "READABLE", PX_READABLE) != 0)
        return -1;
    return PyModule_AddIntConstant(m, "WRITABLE", PX_WRITABLE);
}
