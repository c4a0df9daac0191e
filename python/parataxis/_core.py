"""TimerQueue, Timer and HandlerQueue over the cffi module parataxis._parataxis.

How a Python handler reaches C and comes back exactly once:

- Each add wraps the callable in a _Call and passes ffi.new_handle(call) as the C
  `arg`.  The handle is kept in the module-level dict _LIVE (a root the garbage
  collector cannot break, even when the TimerQueue object itself is gone) until
  the handler's final call -- a one-shot's only call, a periodic timer's aborted
  call -- which removes it.  That call is the release point; nothing else is.
- The C side calls the compiled extern "Python" function pxpy_handler; cffi takes
  the GIL for it.  Every other C call runs with the GIL released (cffi's rule), so
  px_timerq_free and px_queue_wait never block Python threads.
"""
from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import math
import os
import threading
import weakref
from typing import Any, Callable, Dict, Optional, Union

from ._errors import Closed, ForkedError, InvalidArgument, NoMemory, check
from ._parataxis import ffi, lib

Handler = Callable[[bool], Any]
Executor = Union[None, "HandlerQueue", asyncio.AbstractEventLoop, concurrent.futures.Executor]

_NULL = ffi.NULL
_ECANCELED = lib.PX_ECANCELED
_LIVE: Dict["_Call", Any] = {}          # call -> its ffi handle, until the final call
_CTX: Dict[int, Any] = {}               # id(queue state) -> executor ctx handle
_QUEUES: "weakref.WeakSet[TimerQueue]" = weakref.WeakSet()
_HQUEUES: "weakref.WeakSet[HandlerQueue]" = weakref.WeakSet()
_tls = threading.local()


class _State:
    """What handlers of one TimerQueue share; outlives the TimerQueue object."""

    __slots__ = ("__weakref__",)


class _Call:
    __slots__ = ("fn", "periodic", "owner")

    def __init__(self, fn: Handler, periodic: bool, owner: _State) -> None:
        self.fn = fn
        self.periodic = periodic
        self.owner = owner


@ffi.def_extern()
def pxpy_handler(arg: Any, status: int) -> None:
    # cffi reports an exception escaping this function through sys.unraisablehook
    # and returns to C: the worker (or the draining thread) goes on.
    call = ffi.from_handle(arg)
    aborted = status != 0
    if aborted or not call.periodic:
        del _LIVE[call]                 # the final call: release the handle
    prev = getattr(_tls, "current", None)
    _tls.current = call.owner
    try:
        call.fn(aborted)
    finally:
        _tls.current = prev


@ffi.def_extern()
def pxpy_post(ctx: Any, fn: Any, arg: Any, status: int) -> int:
    # Runs on the worker: hand the C trampoline (fn, arg, status) to the
    # concurrent.futures executor.  The trampoline decides, when it runs, whether
    # the timer was cancelled meanwhile -- so cancel wins while it waits there.
    try:
        ffi.from_handle(ctx).submit(lib.pxpy_invoke, fn, arg, status)
    except BaseException:
        return lib.PX_ECLOSED           # shut down: the worker runs it inline
    return 0


def _ns(seconds: float, what: str = "delay") -> int:
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise TypeError(f"{what} must be a number of seconds, not {type(seconds).__name__}")
    if not (seconds >= 0 and math.isfinite(seconds)):
        raise ValueError(f"{what} must be finite and >= 0, got {seconds!r}")
    if seconds >= 4e9:                  # ~126 years: beyond what the clock holds
        raise ValueError(f"{what} too large: {seconds!r}")
    return int(seconds * 1e9)


def _check_handler(fn: object) -> None:
    if not callable(fn):
        raise TypeError(f"handler must be callable, not {type(fn).__name__}")


class HandlerQueue:
    """A drainable queue of handler calls (px_queue): pass it as a TimerQueue's
    executor, then run the handlers on your thread with drain(), after wait() or
    when fileno() is readable (select, poll, epoll, an event loop)."""

    def __init__(self) -> None:
        self._q = lib.px_queue_new()
        if self._q == _NULL:
            raise NoMemory("px_queue_new failed")
        self._forked = False
        self._users: "weakref.WeakSet[TimerQueue]" = weakref.WeakSet()
        _HQUEUES.add(self)

    def _ptr(self) -> Any:
        if self._forked:
            raise ForkedError("HandlerQueue belongs to the parent of a fork()")
        if self._q == _NULL:
            raise Closed("HandlerQueue is closed")
        return self._q

    def drain(self, max: int = 0) -> int:
        """Run up to `max` queued handlers (0: all queued now) here; return how many."""
        if max < 0:
            raise ValueError("max must be >= 0")
        return check(lib.px_queue_drain(self._ptr(), max))

    def fileno(self) -> int:
        """A descriptor readable while handlers wait.  Never read it yourself."""
        return check(lib.px_queue_fd(self._ptr()))

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Block (GIL released) until a handler waits or `timeout` s passed."""
        ns = -1 if timeout is None else _ns(timeout, "timeout")
        return check(lib.px_queue_wait(self._ptr(), ns)) == 1

    def __len__(self) -> int:
        return int(lib.px_queue_size(self._ptr()))

    @property
    def closed(self) -> bool:
        return self._q == _NULL

    def close(self) -> None:
        """Close every TimerQueue posting here, run what is still queued, release."""
        if self._q == _NULL:
            return
        for tq in list(self._users):
            tq.close()
        q, self._q = self._q, _NULL
        _HQUEUES.discard(self)
        if not self._forked:            # in a fork child the calls are the parent's
            lib.px_queue_free(q)

    def __enter__(self) -> "HandlerQueue":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


class TimerQueue:
    """One-shot and periodic timers served by one worker thread.

    executor: None (handlers run on the worker thread), an asyncio event loop
    (handlers run on the loop's thread), a concurrent.futures.Executor, or a
    HandlerQueue.  Handlers are called as fn(aborted), exactly once per timer
    (a periodic one once per tick, then once with aborted=True).
    """

    def __init__(self, executor: Executor = None) -> None:
        self._q = _NULL
        self._closed = True
        self._forked = False
        self._state = _State()
        self._timers: "weakref.WeakSet[Timer]" = weakref.WeakSet()
        self._hq: Optional[HandlerQueue] = None     # our own, for an asyncio loop
        self._user_hq: Optional[HandlerQueue] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        opts = _NULL
        if executor is not None:
            ex = self._make_executor(executor)
            opts = ffi.new("px_timerq_opts *")
            keep = ffi.new("px_executor *", ex)     # copied by px_timerq_new
            opts.executor = keep
        self._q = lib.px_timerq_new(opts)
        if self._q == _NULL:
            _CTX.pop(id(self._state), None)
            raise NoMemory("px_timerq_new failed")
        self._closed = False
        if self._loop is not None:
            self._watch_loop()
        _QUEUES.add(self)

    def _make_executor(self, executor: Any) -> Any:
        if isinstance(executor, HandlerQueue):
            q = executor._ptr()
            executor._users.add(self)
            self._user_hq = executor
            return lib.px_queue_executor(q)
        if isinstance(executor, asyncio.AbstractEventLoop):
            if executor.is_closed():
                raise Closed("the event loop is closed")
            self._loop = executor
            self._hq = HandlerQueue()
            return lib.px_queue_executor(self._hq._q)
        if isinstance(executor, concurrent.futures.Executor):
            h = ffi.new_handle(executor)
            _CTX[id(self._state)] = h
            return {"post": lib.pxpy_post, "ctx": h}
        raise TypeError("executor must be None, an asyncio loop, a "
                        "concurrent.futures.Executor or a HandlerQueue")

    def _on_loop_thread(self) -> bool:
        loop = self._loop
        assert loop is not None
        try:
            return asyncio.get_running_loop() is loop
        except RuntimeError:
            return not loop.is_running()

    def _watch_loop(self) -> None:
        assert self._loop is not None and self._hq is not None
        fd, drain = self._hq.fileno(), self._hq.drain
        if self._on_loop_thread():
            self._loop.add_reader(fd, drain)
        else:
            self._loop.call_soon_threadsafe(self._loop.add_reader, fd, drain)

    def _ptr(self) -> Any:
        if self._forked:
            raise ForkedError("TimerQueue belongs to the parent of a fork()")
        if self._closed:
            raise Closed("TimerQueue is closed")
        return self._q

    def _arm(self, fn: Handler, periodic: bool, first: int, period: int) -> int:
        q = self._ptr()
        call = _Call(fn, periodic, self._state)
        h = ffi.new_handle(call)
        _LIVE[call] = h
        if periodic:
            tid = lib.px_timerq_add_periodic(q, first, period, lib.pxpy_handler, h)
        else:
            tid = lib.px_timerq_add(q, first, lib.pxpy_handler, h)
        if tid == 0:                    # not added: fn will never be called
            del _LIVE[call]
            self._ptr()
            raise NoMemory("the timer could not be added")
        return int(tid)

    def add(self, delay: float, fn: Handler) -> int:
        """Call fn(False) after `delay` seconds, or fn(True) if aborted first.
        Returns the timer id (never 0, never reused by this queue)."""
        _check_handler(fn)
        return self._arm(fn, False, _ns(delay), 0)

    def add_periodic(self, first: float, period: float, fn: Handler) -> int:
        """Call fn(False) after `first` s, then every `period` s (> 0); the timer
        ends with one fn(True) once cancelled or its queue closed."""
        _check_handler(fn)
        p = _ns(period, "period")
        if p == 0:
            raise ValueError("period must be > 0")
        return self._arm(fn, True, _ns(first, "first"), p)

    def cancel(self, timer_id: int) -> bool:
        """Abort a timer.  True while its handler has not started (it is then
        called with aborted=True); False when too late or unknown."""
        if not isinstance(timer_id, int) or timer_id < 0 or timer_id >= 1 << 64:
            return False
        return check(lib.px_timerq_cancel(self._ptr(), timer_id)) == 1

    def cancel_all(self) -> int:
        """Cancel every timer whose handler has not started; return how many."""
        return int(lib.px_timerq_cancel_all(self._ptr()))

    @property
    def pending(self) -> int:
        """How many timers wait for their deadline."""
        return int(lib.px_timerq_pending(self._ptr()))

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Abort every timer, deliver every handler call owed, stop the worker.

        Handlers on the worker thread (no executor) have all run when this
        returns; with an asyncio loop the aborted handlers run here (or, when
        called from one of this queue's handlers, soon on the loop).  Called from
        one of its own handlers it does not wait for itself.  Idempotent."""
        if self._closed:
            return
        self._closed = True
        _QUEUES.discard(self)
        for t in list(self._timers):
            t.close()
        q, self._q = self._q, _NULL
        if self._forked:
            lib.px_timerq_free(q)       # child: frees memory, runs no handler
            return
        inside = getattr(_tls, "current", None) is self._state
        lib.px_timerq_free(q)           # GIL released while it joins the worker
        if not inside:
            _CTX.pop(id(self._state), None)
        if self._hq is not None:
            if inside or not self._on_loop_thread():
                assert self._loop is not None
                self._loop.call_soon_threadsafe(self._release_hq)
            else:
                self._release_hq()

    def _release_hq(self) -> None:
        hq, self._hq = self._hq, None
        if hq is None or hq.closed:
            return
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.remove_reader(hq.fileno())
        hq.close()                      # runs the aborted calls still queued

    def __enter__(self) -> "TimerQueue":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if not self._closed and self._loop is None:
                self.close()
        except Exception:
            pass


class Timer:
    """A reusable deadline timer on a TimerQueue (like Asio's steady_timer): set
    the expiry, then async_wait any number of handlers; all fire together."""

    def __init__(self, queue: TimerQueue) -> None:
        if not isinstance(queue, TimerQueue):
            raise TypeError("Timer needs a TimerQueue")
        self._queue = queue
        self._t = lib.px_timer_new(queue._ptr())
        if self._t == _NULL:
            raise NoMemory("px_timer_new failed")
        queue._timers.add(self)

    def _ptr(self) -> Any:
        self._queue._ptr()
        if self._t == _NULL:
            raise Closed("Timer is closed")
        return self._t

    def expires_after(self, delay: float) -> int:
        """Set the expiry to now + `delay` s; abort the pending waits (they get
        aborted=True) and return how many."""
        return check(lib.px_timer_expires_after(self._ptr(), _ns(delay)))

    @property
    def expiry(self) -> float:
        """The expiry in seconds on the clock of parataxis.now()."""
        return check(lib.px_timer_expiry(self._ptr())) / 1e9

    def async_wait(self, fn: Handler) -> None:
        """Call fn(False) at the expiry, or fn(True) if the wait is aborted first."""
        _check_handler(fn)
        t = self._ptr()
        call = _Call(fn, False, self._queue._state)
        h = ffi.new_handle(call)
        _LIVE[call] = h
        rc = lib.px_timer_async_wait(t, lib.pxpy_handler, h)
        if rc < 0:
            del _LIVE[call]
            check(rc)

    def cancel(self) -> int:
        """Abort the pending waits (aborted=True); return how many."""
        return check(lib.px_timer_cancel(self._ptr()))

    def close(self) -> None:
        """Abort the pending waits and release the timer.  Idempotent."""
        t, self._t = self._t, _NULL
        if t != _NULL and not self._queue._forked:
            lib.px_timer_free(t)

    def __enter__(self) -> "Timer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if not self._queue._closed:
                self.close()
        except Exception:
            pass


def now() -> float:
    """The library's monotonic clock, in seconds."""
    return lib.px_now() / 1e9


def version() -> str:
    """The C library's version string."""
    return ffi.string(lib.px_version()).decode()


def _close_all_at_exit() -> None:
    # Before the interpreter finalizes: no worker may call into Python after this.
    for tq in list(_QUEUES):
        try:
            tq.close()
        except Exception:
            pass
    for hq in list(_HQUEUES):
        try:
            hq.close()
        except Exception:
            pass


def _after_fork_in_child() -> None:
    # Only the forking thread survives: the workers are gone and every pending
    # handler belongs to the parent.  Mark everything unusable; drop the handles.
    for tq in list(_QUEUES):
        tq._forked = True
    for hq in list(_HQUEUES):
        hq._forked = True
    _LIVE.clear()
    _CTX.clear()


atexit.register(_close_all_at_exit)
os.register_at_fork(after_in_child=_after_fork_in_child)
