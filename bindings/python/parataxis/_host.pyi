"""Types of parataxis._host, the CPython extension for what holds the GIL: the
greenlet host of Python fibers (_host.c), the handles of the C objects they wait
on (_handles.c), and the timer queues' handles, add and cancel, trampolines and
executors (_timers.c).

A px_fiber is a capsule (spawn's handle); a sync object, token, gate, batch or
run executor is an object whose buffer cffi views typed (ffi.from_buffer): no
address is a Python int.  Every fiber function (begin ... close_executor)
raises NoFiberError when this thread runs no px.run, but current() and
configure(); those that switch greenlets may raise what the switch raised.
"""
from typing import Any, Callable, List, Optional, Set, Tuple

from greenlet import greenlet

from ._fibers import _Run

def begin(run: _Run, root: greenlet,
          factory: Callable[[Optional[int], Optional["Call"]], Any], clock: int = ...) -> None:
    """Starts this thread's run with a new scheduler on clock `clock`
    (PX_CLOCK_REAL, the default, or PX_CLOCK_VIRTUAL; another: InvalidArgument),
    whose dump shows each fiber's Python stack (px_sched_opts.describe).
    BusyError while a run is under way (or on a fiber).  factory(key, None)
    makes the Fiber of Scheduler.post's call `key`, factory(None, call) that
    of a timer queue's."""
def finish_run() -> Tuple[Optional[BaseException], Optional[str]]:
    """Ends this thread's run and frees its scheduler; returns what a signal
    raised while it waited, and the last deadlock report."""
def current() -> Optional[_Run]:
    """The run of this thread (begin's first argument), or None."""
def cancel() -> None:
    """Cancels every wait of every fiber of this thread's run."""
def loop() -> int:
    """From the root: runs the fibers until the run is over; returns 0 or the
    C error that ended it (PX_EDEADLK, ...)."""
def spawn(fiber: Any, name: Optional[str] = ...) -> Tuple[object, int]:
    """Makes a fiber of this thread's run that runs fiber._main() on a
    greenlet, named `name` in C (none: named after fiber._fn when a dump or
    report needs it); returns (a capsule of its px_fiber, its id)."""
def group_spawn(group: Any, fiber: Any, name: Optional[str] = ...) -> Tuple[int, object, int]:
    """Makes a member of group (a Prim of a px_group) that runs
    fiber._main() on a greenlet, named as spawn's; returns (0, spawn's
    handle, its id) or (the C code that refused it, None, 0)."""
def current_fiber() -> Any:
    """The Fiber whose body the calling fiber runs, or None off-fiber."""
def inspect() -> List[Tuple[int, int, Optional[str], int, Optional[str], Optional[str],
                            Optional[str], Tuple[int, ...], int, int, int, int, Any, Any]]:
    """Every live fiber of this thread's run (px_sched_inspect), in spawn
    order: (id, number, C name or None, state, reason, kind, object_name,
    holders' numbers, fd, events, deadline_ns, waited_ns, innermost frame or
    None, Fiber or None).  Never waits."""
def release(handle: object) -> None:
    """px_fiber_release of spawn's handle (once: the handle is then spent)."""
def yield_() -> None:
    """Lets every other ready fiber run once, then goes on (may wait: it is
    the point of it).  NoFiberError off-fiber."""
def park(rc: int) -> int:
    """After a park that returned rc: waits for the turn when rc is
    PX_EYIELD; returns the park's outcome."""
def sleep(ns: int) -> int:
    """px_sleep(ns), waiting for the turn when it parks; returns its outcome."""
def wait(op: int, obj: object, value: int = ...) -> int:
    """Makes the call `op` on obj (a Prim of the op's kind; spawn's handle for
    JOIN; value: a Channel send's key) until it returns something other than
    PX_EYIELD, waiting for the turn in between; returns that."""

# -- _io.c: waits on fds, the socket calls, the blocking pool ------------------

READABLE: int
WRITABLE: int

def wait_fd(fd: int, events: int, timeout_ns: int) -> None:
    """Parks the calling fiber until fd is ready for events or timeout_ns
    passes (-1: never; TimeoutError); raises through _errors.raise_fd."""
def run_blocking(fn: Callable[..., Any], args: Tuple[Any, ...], abandon: bool) -> Any:
    """fn(*args) on a thread of the C pool while the calling fiber parks."""
# Instance methods of px.socket (self: the socket; its fileno() and _px_ns).
def socket_recv(self: Any, bufsize: int, flags: int = ...) -> bytes: ...
def socket_recv_into(self: Any, buffer: Any, nbytes: int = ..., flags: int = ...) -> int: ...
def socket_send(self: Any, data: Any, flags: int = ...) -> int: ...
def socket_sendall(self: Any, data: Any, flags: int = ...) -> None: ...

class Prim:
    """A sync object's C memory (kind K_*, n: a Barrier's parties, a
    Semaphore's value, a Channel's capacity); collected at its deallocation
    once collect() was called."""
    def __init__(self, kind: int, n: int = ...) -> None: ...
    @property
    def slot(self) -> int: ...
    def collect(self) -> None:
        """Once this handle is deallocated: frees the C object, or keeps it
        until a run of that thread ends while fibers still hold it or wait on
        it."""

class Token:
    """A px_token, collected when this object is deallocated (freed at the
    end of the run during one, unless unscoped() was called)."""
    def unscoped(self) -> None:
        """No scope uses the token any more: freed at deallocation, even
        during a run."""

MUTEX_LOCK: int
MUTEX_UNLOCK: int
RDLOCK: int
WRLOCK: int
WG_WAIT: int
ARRIVE: int
ONCE_BEGIN: int
SEM_ACQUIRE: int
EVENT_WAIT: int
CHAN_SEND: int
CHAN_RECV: int
JOIN: int
FUTURE_WAIT: int
GROUP_WAIT: int
K_FUTURE: int
K_GROUP: int
def wait_futures(futures: Any, any: bool) -> int:
    """px_future_wait_all (any false: 0 or the first failure's status) or
    px_future_wait_any (its index) over a sequence of futures' Prims, waiting
    for the turn while it parks; or a C error code."""
K_MUTEX: int
K_RWLOCK: int
K_WAITGROUP: int
K_BARRIER: int
K_ONCE: int
K_SEM: int
K_EVENT: int
K_CHAN: int
SELECT_SEND: int
SELECT_RECV: int
SELECT_EVENT: int
SELECT_SEM: int
SELECT_FD: int
SELECT_DEADLINE: int
SELECT_DEFAULT: int
def select(cases: Any) -> Tuple[int, int, int]:
    """px_select over cases, a sequence of (kind, obj[, a[, b]]) (obj a Prim
    of the case's kind or None; a: a SEND's key, an FD's fd, a DEADLINE's ns;
    b: an FD's events), waiting for the turn while it parks; returns (index,
    result, a RECV's key) or (rc < 0, 0, 0)."""
class Executor:
    """The executor of a run; its buffer is the px_executor a timer queue
    copies."""
def executor() -> Executor:
    """The executor of this thread's run (one a run)."""
def post(executor: Executor, key: int) -> int:
    """Posts Scheduler.post's call `key` through the executor (any thread);
    0 or a C error code."""
def hold(executor: Executor) -> bool:
    """Holds the run for a call owed to it; False once it is cancelled or
    over.  Any thread."""
def unhold(executor: Executor) -> None:
    """Lets go of one hold that hold() gave.  Any thread."""
def close_executor() -> bool:
    """Closes the run's executor unless calls are still posted (False: the
    run must go on)."""
def scope_push(scope: object) -> Any:
    """Makes scope the calling fiber's innermost open scope; returns the one
    it replaces (None if none).  NoFiberError off-fiber."""
def scope_pop(scope: object, outer: object) -> bool:
    """When scope is the calling fiber's innermost open scope, outer becomes
    it: True.  Else False (another fiber's, out of order, off-fiber) and
    nothing changes."""
def scope_top() -> Any:
    """The calling fiber's innermost open scope, or None (also off-fiber)."""
def configure(posted: Callable[[int, int], object]) -> None:
    """Sets the function that runs Scheduler.post's call `key` inline, as
    posted(key, status)."""

# The timer queues (_timers.c).

class TimerHandle:
    @property
    def _owner(self) -> Any: ...
    def cancel(self) -> bool: ...
    def cancelled(self) -> bool: ...
    def when(self) -> float: ...

class Gate:
    """A gate's memory (_gate.h), viewed as a pxpy_gate *; shut until
    pxpy_gate_init."""

class _TimerQueueBase:
    _state: Any
    _sched: Any
    _loop: Any
    _gate: Optional[Gate]
    def add(self, delay: float, fn: Callable[[bool], Any]) -> TimerHandle: ...
    def cancel(self, handle: TimerHandle) -> bool: ...
    def _arm(self, delay: float, fn: Callable[[bool], Any]) -> TimerHandle: ...
    def _arm_periodic(self, first_ns: int, period_ns: int,
                      fn: Callable[[bool], Any]) -> TimerHandle: ...

class Call:
    """A call of the library's owed to a handler; made once."""
    def __call__(self, status: int) -> None: ...
    def run(self) -> None: ...

class Batch:
    """A worker's executor (its buffer is a px_executor): the calls of a
    batch run under one hold of the GIL, or go to submit(call) -> 0 or a C
    code."""
    def __init__(self, submit: Optional[Callable[[Call], int]]) -> None: ...
    def on_worker(self) -> bool:
        """True on the worker thread that flushes this batch."""

def timers_setup(tls: Any, refused: Callable[[int, str], Any],
                 run_handler: Callable[[Callable[[bool], Any], Any, Any, bool], None]) -> None:
    """Once, from _core.py: what the handles and queues call back."""
def timer_wait(gate: Gate, owner: Any, sched: Any, fn: Callable[[bool], Any]) -> int:
    """A Timer's async_wait: 0, or the C code that refused it."""
def live_owners() -> Set[Any]:
    """The owners (_State) with a handler call owed."""
def live_clear() -> None:
    """In a fork's child: drops every owed call without a call."""
