"""Types of parataxis._host, the greenlet host of Python fibers (_host.c) and
the handles of the C objects it waits on (_handles.c).

A px_fiber is a capsule (spawn's handle); a sync object or token is a Prim or
Token, which cffi views typed with ffi.from_buffer.  The executor's post and
ctx and a handler call's fn and arg are still ints (see executor(), begin()).
Every function but current(), configure() and handler_kind() raises
NoFiberError when this thread runs no px.run; those that switch greenlets may
raise what the switch raised.
"""
from typing import Any, Callable, Optional, Tuple

from greenlet import greenlet

from ._fibers import _Run

def begin(run: _Run, root: greenlet,
          factory: Callable[[int, int, int], Any]) -> None:
    """Starts this thread's run with a new scheduler.  BusyError while a run
    is under way (or on a fiber)."""
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
def spawn(fiber: Any) -> Tuple[object, int]:
    """Makes a fiber of this thread's run that runs fiber._main() on a
    greenlet; returns (a capsule of its px_fiber, its id)."""
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

class Prim:
    """A sync object's C memory (kind K_*, n: a Barrier's parties, a
    Semaphore's value, a Channel's capacity); Python frees it."""
    def __init__(self, kind: int, n: int = ...) -> None: ...
    @property
    def slot(self) -> int: ...

class Token:
    """A px_token, freed when this object is deallocated."""

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
K_MUTEX: int
K_RWLOCK: int
K_WAITGROUP: int
K_BARRIER: int
K_ONCE: int
K_SEM: int
K_EVENT: int
K_CHAN: int
def executor() -> Tuple[object, int, int]:
    """The executor of this thread's run: (capsule that owns it, address of
    its post function, address of its ctx)."""
def post(capsule: object, key: int) -> int:
    """Posts Scheduler.post's call `key` through the executor of `capsule`
    (any thread); 0 or a C error code."""
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
def handler_kind(fn: int) -> int:
    """1 for the address of Scheduler.post's handler, else 0."""
def configure(posted: Callable[[int, int], object]) -> None:
    """Sets the function that runs Scheduler.post's call `key` inline, as
    posted(key, status)."""
