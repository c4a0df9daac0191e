"""Types of parataxis._host, the greenlet host of Python fibers (_host.c).

Addresses (of a C function, a px_fiber, a primitive) are ints.  Every function
but current(), configure() and handler_kind() raises NoFiberError when this
thread runs no px.run; those that switch greenlets may raise what the switch
raised.
"""
from typing import Any, Callable, Optional, Tuple

from greenlet import greenlet

from ._fibers import _Run

def begin(run: _Run, root: greenlet,
          factory: Callable[[int, int, int], greenlet]) -> int:
    """Starts this thread's run with a new scheduler; returns its address.
    BusyError while a run is under way (or on a fiber)."""
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
def spawn(glet: greenlet) -> int:
    """Makes the greenlet a fiber of this thread's run; returns the px_fiber
    address."""
def finish() -> None:
    """The calling fiber's body ended; its greenlet returns right after."""
def yield_() -> None:
    """Lets every other ready fiber run once, then goes on (may wait: it is
    the point of it).  NoFiberError off-fiber."""
def park(rc: int) -> int:
    """After a park or sleep that returned rc: waits for the turn when rc is
    PX_EYIELD; returns the park's outcome."""
def wait(fn: int, obj: int, out: int = ...) -> int:
    """Calls C function address fn(obj[, out]) until it returns something
    other than PX_EYIELD, waiting for the turn in between; returns that."""
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
