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
#include <stdlib.h>
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

/*
** Makes the call until it does not say EAGAIN, waiting for `events` in
** between, bounded by *deadline (-2: not taken yet, from timeout_ns).
** Returns its result, or -1 with an exception set: OSError of the call's
** errno (BlockingIOError with a timeout of 0, as a non-blocking socket's),
** or the wait's.
*/
static Py_ssize_t io_loop(try_fn call, int fd, void *buf, size_t n, int flags,
                          unsigned events, int64_t timeout_ns, int64_t *deadline)
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
        if (*deadline == -2)
            *deadline = deadline_of(timeout_ns);
        int rc = await_fd(fd, events, *deadline, 1);
        if (rc != 0) {
            raise_wait(rc, fd, events);
            return -1;
        }
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

/* The fast calls' arguments: n of them, the ints among them (a NULL slot in
** `ints` for one that is not), and the timeout in ns (-1: none), last. */
static int args_of(const char *name, PyObject *const *args, Py_ssize_t nargs, Py_ssize_t n,
                   int *ints[], int64_t *timeout_ns)
{
    if (nargs != n) {
        PyErr_Format(PyExc_TypeError, "%s takes %zd arguments", name, n);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n - 1; i++) {
        if (ints[i] != NULL && int_of(args[i], ints[i]) != 0)
            return -1;
    }
    long long t = PyLong_AsLongLong(args[n - 1]);
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
    int64_t timeout_ns;
    if (args_of("wait_fd", args, nargs, 3, (int *[]){ &fd, &events }, &timeout_ns) != 0)
        return NULL;
    int rc = await_fd(fd, (unsigned)events, deadline_of(timeout_ns), 0);
    return rc == 0 ? Py_NewRef(Py_None) : raise_wait(rc, fd, (unsigned)events);
}

PyDoc_STRVAR(recv_doc, "recv(fd, n, flags, timeout_ns) -> bytes: recv(2) of at most n bytes, "
                       "waiting while there are none (timeout_ns: -1 never, 0 do not wait).");

static PyObject *h_recv(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    int fd, n, flags;
    int64_t timeout_ns, deadline = -2;
    if (args_of("recv", args, nargs, 4, (int *[]){ &fd, &n, &flags }, &timeout_ns) != 0)
        return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "negative buffersize in recv");
        return NULL;
    }
    PyObject *b = PyBytes_FromStringAndSize(NULL, n);
    if (b == NULL)
        return NULL;
    Py_ssize_t got = io_loop(try_recv, fd, PyBytes_AS_STRING(b), (size_t)n, flags,
                             PX_READABLE, timeout_ns, &deadline);
    if (got < 0) {
        Py_DECREF(b);
        return NULL;
    }
    if (got != n && _PyBytes_Resize(&b, got) != 0)
        return NULL;
    return b;
}

PyDoc_STRVAR(recv_into_doc, "recv_into(fd, buffer, nbytes, flags, timeout_ns) -> int: recv(2) "
                            "into a writable buffer, at most nbytes (0: its size).");

static PyObject *h_recv_into(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    int fd, n, flags;
    int64_t timeout_ns, deadline = -2;
    if (args_of("recv_into", args, nargs, 5, (int *[]){ &fd, NULL, &n, &flags },
                &timeout_ns) != 0)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[1], &view, PyBUF_WRITABLE) != 0)
        return NULL;
    Py_ssize_t got = -1;
    if (n < 0)
        PyErr_SetString(PyExc_ValueError, "negative buffersize in recv_into");
    else if (n > view.len)
        PyErr_SetString(PyExc_ValueError, "buffer too small for requested bytes");
    else
        got = io_loop(try_recv, fd, view.buf, (size_t)(n == 0 ? view.len : n), flags,
                      PX_READABLE, timeout_ns, &deadline);
    PyBuffer_Release(&view);
    return got < 0 ? NULL : PyLong_FromSsize_t(got);
}

PyDoc_STRVAR(send_doc, "send(fd, data, flags, timeout_ns) -> int: one send(2) of data, waiting "
                       "while there is no room; the count sent.");

static PyObject *h_send(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    int fd, flags;
    int64_t timeout_ns, deadline = -2;
    if (args_of("send", args, nargs, 4, (int *[]){ &fd, NULL, &flags }, &timeout_ns) != 0)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[1], &view, PyBUF_SIMPLE) != 0)
        return NULL;
    Py_ssize_t sent = io_loop(try_send, fd, view.buf, (size_t)view.len, flags, PX_WRITABLE,
                              timeout_ns, &deadline);
    PyBuffer_Release(&view);
    return sent < 0 ? NULL : PyLong_FromSsize_t(sent);
}

PyDoc_STRVAR(sendall_doc, "sendall(fd, data, flags, timeout_ns) -> None: sends all of data, "
                          "waiting whenever there is no room; timeout_ns bounds the whole call.");

static PyObject *h_sendall(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    int fd, flags;
    int64_t timeout_ns, deadline = -2;
    if (args_of("sendall", args, nargs, 4, (int *[]){ &fd, NULL, &flags }, &timeout_ns) != 0)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[1], &view, PyBUF_SIMPLE) != 0)
        return NULL;
    const char *p = view.buf;
    Py_ssize_t left = view.len, sent = 0;
    while (left > 0 && sent >= 0) {
        sent = io_loop(try_send, fd, (void *)p, (size_t)left, flags, PX_WRITABLE, timeout_ns,
                       &deadline);
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

static PyMethodDef io_methods[] = {
    { "wait_fd", (PyCFunction)(void (*)(void))h_wait_fd, METH_FASTCALL, wait_fd_doc },
    { "recv", (PyCFunction)(void (*)(void))h_recv, METH_FASTCALL, recv_doc },
    { "recv_into", (PyCFunction)(void (*)(void))h_recv_into, METH_FASTCALL, recv_into_doc },
    { "send", (PyCFunction)(void (*)(void))h_send, METH_FASTCALL, send_doc },
    { "sendall", (PyCFunction)(void (*)(void))h_sendall, METH_FASTCALL, sendall_doc },
    { "run_blocking", h_run_blocking, METH_VARARGS, run_blocking_doc },
    { NULL, NULL, 0, NULL },
};

int pxh_add_io(PyObject *m, PyObject *errors)
{
    raise_fd = PyObject_GetAttrString(errors, "raise_fd");
    if (raise_fd == NULL || PyModule_AddFunctions(m, io_methods) != 0)
        return -1;
    if (PyModule_AddIntConstant(m, "READABLE", PX_READABLE) != 0)
        return -1;
    return PyModule_AddIntConstant(m, "WRITABLE", PX_WRITABLE);
}
