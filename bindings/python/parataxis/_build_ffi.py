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
#define PX_EINTR      ...

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

typedef struct px_fiber px_fiber;
typedef struct px_token px_token;
int px_join(px_fiber *f, void **result);
void px_fiber_release(px_fiber *f);
uint64_t px_fiber_id(const px_fiber *f);
uint64_t px_self(void);
int px_sleep(int64_t ns);
int px_wake(uint64_t id);
int px_park_result(void);
int px_scope_push_timeout(int64_t ns);
int px_scope_push_cancel(px_token *token);
int px_scope_pop(void);
px_token *px_token_new(void);
int px_token_cancel(px_token *token);
int px_token_cancelled(const px_token *token);
void px_token_free(px_token *token);

typedef struct px_mutex px_mutex;
px_mutex *px_mutex_new(void);
int px_mutex_lock(px_mutex *m);
int px_mutex_trylock(px_mutex *m);
int px_mutex_unlock(px_mutex *m);
uint64_t px_mutex_owner(const px_mutex *m);
size_t px_mutex_waiters(const px_mutex *m);
int px_mutex_free(px_mutex *m);

typedef struct px_rwlock px_rwlock;
px_rwlock *px_rwlock_new(void);
int px_rwlock_rdlock(px_rwlock *l);
int px_rwlock_wrlock(px_rwlock *l);
int px_rwlock_tryrdlock(px_rwlock *l);
int px_rwlock_trywrlock(px_rwlock *l);
int px_rwlock_rdunlock(px_rwlock *l);
int px_rwlock_wrunlock(px_rwlock *l);
size_t px_rwlock_readers(const px_rwlock *l);
uint64_t px_rwlock_writer(const px_rwlock *l);
size_t px_rwlock_waiters(const px_rwlock *l);
int px_rwlock_free(px_rwlock *l);

typedef struct px_waitgroup px_waitgroup;
px_waitgroup *px_waitgroup_new(void);
int px_waitgroup_add(px_waitgroup *wg, int64_t n);
int px_waitgroup_done(px_waitgroup *wg);
int px_waitgroup_wait(px_waitgroup *wg);
int64_t px_waitgroup_count(const px_waitgroup *wg);
int px_waitgroup_free(px_waitgroup *wg);

typedef struct px_barrier px_barrier;
px_barrier *px_barrier_new(size_t parties);
int px_barrier_arrive_and_wait(px_barrier *b);
uint64_t px_barrier_phase(const px_barrier *b);
size_t px_barrier_waiting(const px_barrier *b);
int px_barrier_free(px_barrier *b);

typedef struct px_once px_once;
px_once *px_once_new(void);
int px_once_begin(px_once *o);
int px_once_end(px_once *o);
int px_once_done(const px_once *o);
int px_once_free(px_once *o);

typedef struct px_sem px_sem;
px_sem *px_sem_new(size_t initial);
int px_sem_acquire(px_sem *sem);
int px_sem_tryacquire(px_sem *sem);
int px_sem_release(px_sem *sem);
size_t px_sem_value(const px_sem *sem);
size_t px_sem_waiters(const px_sem *sem);
int px_sem_free(px_sem *sem);

typedef struct px_event px_event;
px_event *px_event_new(void);
int px_event_set(px_event *e);
int px_event_clear(px_event *e);
int px_event_is_set(const px_event *e);
int px_event_wait(px_event *e);
int px_event_free(px_event *e);

typedef struct px_chan px_chan;
px_chan *px_chan_new(size_t capacity);
int px_chan_send(px_chan *ch, void *v);
int px_chan_recv(px_chan *ch, void **v);
int px_chan_trysend(px_chan *ch, void *v);
int px_chan_tryrecv(px_chan *ch, void **v);
int px_chan_close(px_chan *ch);
size_t px_chan_len(const px_chan *ch);
size_t px_chan_cap(const px_chan *ch);
int px_chan_free(px_chan *ch);
"""

# The C half's own declarations: the cdef part of _pxpy.h (see there).
HEADER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_pxpy.h")


def pxpy_cdef(path: str = HEADER) -> str:
    with open(path) as f:
        text = f.read()
    begin, end = "/* cdef: begin */", "/* cdef: end */"
    return text[text.index(begin) + len(begin):text.index(end)]


# The gate's fields are C11 atomics, which cffi cannot read: it learns the
# struct's size from the compiler (_pxpy.h defines it), so that Python can own
# a gate's memory (ffi.new; see _new_gate in _core.py).
GATE = r"""
struct pxpy_gate { ...; };
"""

# Python functions that C calls: compiled by cffi, defined in _core.py.  The
# "Python+C" ones are called by _pxpy.c too (declared in _pxpy.h); pxpy_post is
# taken from Python as a px_executor's post.
EXTERN_PYTHON = r"""
extern "Python+C" void pxpy_handler(uintptr_t key, int status);
extern "Python" int pxpy_post(void *ctx, px_handler_fn fn, void *arg, int status);
"""

# _pxpy.c is compiled next to what cffi generates (python/CMakeLists.txt).
SOURCE = '#include "_pxpy.h"\n'


def make_ffi() -> cffi.FFI:
    ffi = cffi.FFI()
    ffi.cdef(CDEF + pxpy_cdef() + GATE + EXTERN_PYTHON)
    ffi.set_source("parataxis._parataxis", SOURCE)
    return ffi


if __name__ == "__main__":
    make_ffi().emit_c_code(sys.argv[1])
