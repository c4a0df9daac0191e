"""Generate the C source of the cffi extension parataxis._parataxis (API mode).

Run at build time by python/CMakeLists.txt:  python _build_ffi.py OUT.c
CMake then compiles OUT.c and _pxpy.c (the binding's own C, under the project's
warnings) into one Python module and links it to libparataxis.so.  The cdef is
the part of parataxis.h that Python calls, the declarations of _pxpy.h, and the
Python functions that C calls.
"""
import os
import sys

import cffi

CDEF = r"""
typedef void (*px_handler_fn)(void *arg, int status);
typedef struct px_executor {
    int (*post)(void *ctx, px_handler_fn fn, void *arg, int status);
    void *ctx;
    void (*flush)(void *ctx);
} px_executor;

#define PX_EINVAL     ...
#define PX_ENOMEM     ...
#define PX_ETIMEDOUT  ...
#define PX_ECANCELED  ...
#define PX_EDEADLK    ...
#define PX_EPERM      ...
#define PX_EBUSY      ...
#define PX_EOWNERDEAD ...
#define PX_ENOFIBER   ...
#define PX_EYIELD     ...
#define PX_ECLOSED    ...
#define PX_EFORKED    ...
#define PX_ETHREAD    ...

const char *px_version(void);
const char *px_strerror(int code);
int64_t px_now(void);

typedef struct px_queue px_queue;
px_queue *px_queue_new(void);
px_executor px_queue_executor(px_queue *q);
int px_queue_post(px_queue *q, px_handler_fn fn, void *arg, int status);
int px_queue_drain(px_queue *q, size_t max);
int px_queue_fd(px_queue *q);
int px_queue_wait(px_queue *q, int64_t timeout_ns);
size_t px_queue_size(px_queue *q);
void px_queue_free(px_queue *q);

typedef struct px_timerq px_timerq;
typedef struct px_timerq_opts {
    const px_executor *executor;
    int64_t timer_slack_ns;
    int64_t abort_linger_ns;
} px_timerq_opts;
px_timerq *px_timerq_new(const px_timerq_opts *opts);
uint64_t px_timerq_add(px_timerq *q, int64_t delay_ns, px_handler_fn fn, void *arg);
uint64_t px_timerq_add_at(px_timerq *q, int64_t deadline, px_handler_fn fn, void *arg);
uint64_t px_timerq_add_periodic(px_timerq *q, int64_t first_ns, int64_t period_ns,
                                px_handler_fn fn, void *arg);
int px_timerq_cancel(px_timerq *q, uint64_t id);
size_t px_timerq_cancel_all(px_timerq *q);
size_t px_timerq_pending(px_timerq *q);
void px_timerq_free(px_timerq *q);

typedef struct px_timer px_timer;
px_timer *px_timer_new(px_timerq *q);
int px_timer_expires_after(px_timer *t, int64_t delay_ns);
int px_timer_expires_at(px_timer *t, int64_t deadline);
int64_t px_timer_expiry(px_timer *t);
int px_timer_async_wait(px_timer *t, px_handler_fn fn, void *arg);
int px_timer_cancel(px_timer *t);
void px_timer_free(px_timer *t);
"""

# The C half's own declarations: the cdef part of _pxpy.h (see there).
HEADER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_pxpy.h")


def pxpy_cdef(path: str = HEADER) -> str:
    with open(path) as f:
        text = f.read()
    begin, end = "/* cdef: begin */", "/* cdef: end */"
    return text[text.index(begin) + len(begin):text.index(end)]


# Python functions that C calls: compiled by cffi, defined in _core.py.  The
# "Python+C" ones are called by _pxpy.c too (declared in _pxpy.h); pxpy_post is
# taken from Python as a px_executor's post.
EXTERN_PYTHON = r"""
extern "Python+C" void pxpy_handler(uintptr_t key, int status);
extern "Python+C" void pxpy_run_keys(pxpy_keys *k);
extern "Python" int pxpy_post(void *ctx, px_handler_fn fn, void *arg, int status);
"""

# _pxpy.c is compiled next to what cffi generates (python/CMakeLists.txt).
SOURCE = '#include "_pxpy.h"\n'


def make_ffi() -> cffi.FFI:
    ffi = cffi.FFI()
    ffi.cdef(CDEF + pxpy_cdef() + EXTERN_PYTHON)
    ffi.set_source("parataxis._parataxis", SOURCE)
    return ffi


if __name__ == "__main__":
    make_ffi().emit_c_code(sys.argv[1])
