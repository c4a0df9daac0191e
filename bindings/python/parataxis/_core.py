"""TimerQueue, Timer and HandlerQueue over the cffi module parataxis._parataxis.

How a Python handler reaches C and comes back exactly once:

- Each add wraps the callable in a TimerHandle, a C type (_host, _timers.c),
  which holds it, its queue's _State and the contextvars context copied at the
  add (the handler runs in it, as loop.call_later's callbacks do).  Its address
  is the C `arg` (C to C: never a Python int); while the call is owed the handle
  is on a live list in C that holds it (a root the garbage collector cannot break, even when the
  TimerQueue object itself is gone), until the handler's final call -- a
  one-shot's only call, a periodic timer's aborted call -- takes it off.  That
  call is the release point; nothing else is.  A handle refers to its queue's
  _State, never to the TimerQueue, so pending timers do not keep a dropped
  queue alive.  A Timer's waits are such handles too, never shown.
- Every C call on a queue, timer or handler queue goes through the object's
  gate (_gate.h, _pxpy.c): close() shuts the gate, waits for the calls under
  way in other threads, and only then frees the C object.  A call that loses
  the race is refused and raises Closed.  Its memory is a _host.Gate, which
  cffi views as a pxpy_gate *.
- The library calls a handler through _host's C trampolines, which take the
  GIL and call _run_handler here.  Every C call from cffi runs with the GIL
  released (cffi's rule), so px_timerq_free and a HandlerQueue wait never block
  Python threads -- except TimerQueue.add and cancel, C methods of its base
  _host._TimerQueueBase, which are short and keep it (see _timers.c).
- A queue without an executor, or with a concurrent.futures one, gets the C
  executor _host.Batch: the worker's calls of one batch run (or are submitted)
  under one hold of the GIL, not one each, and the one-shot handlers among them
  are called in one go from C; see _timers.c.
"""
from __future__ import annotations

import _thread
import asyncio
import atexit
import collections
import concurrent.futures
import functools
import math
import os
import threading
import time
import weakref
from typing import Any, Callable, Dict, NoReturn, Optional, Set, TypeVar, Union

from . import _host
from ._errors import Closed, ForkedError, InvalidArgument, NoMemory, check, raise_for
from ._parataxis import ffi, lib

Handler = Callable[[bool], Any]
Executor = Union[None, "HandlerQueue", asyncio.AbstractEventLoop, concurrent.futures.Executor]

_NULL = ffi.NULL
_ECANCELED = lib.PX_ECANCELED
_EINTR = lib.PX_EINTR
_CTX: Dict[int, Any] = {}               # id(queue state) -> what its executor's ctx needs
_QUEUES: "weakref.WeakSet[TimerQueue]" = weakref.WeakSet()
_HQUEUES: "weakref.WeakSet[HandlerQueue]" = weakref.WeakSet()
_DEFERRED: "set[_State]" = set()       # closed from their own worker: calls owed
# What the reaper threads still have to free: (px_timerq *, its _State) of the
# dropped queues whose worker runs Python (see _reap).  A deque: append and
# popleft take no lock, so a finalizer may append whatever locks its thread holds.
_REAP: "collections.deque[Any]" = collections.deque()
_reaper = {"running": False, "stopped": False}
_REAPING: "set[int]" = set()            # the reaper threads freeing one (exit waits)
_tls = threading.local()
# How late an aborted handler may run (px_timerq_opts.abort_linger_ns): every
# delivery hands the GIL to the worker and back, several microseconds here, so
# the worker gathers a millisecond's aborts into one.
_ABORT_LINGER_NS = 1_000_000
# The handles and the hot pair, add and cancel, in C, as CPython objects
# rather than cffi calls (see _timers.c).
TimerHandle = _host.TimerHandle
_TimerQueueBase = _host._TimerQueueBase
# Executors that run a call in another process or interpreter: they cannot call
# a handler (or the library's call) of this one.
_ELSEWHERE = tuple(c for c in (getattr(concurrent.futures, "ProcessPoolExecutor", None),
                               getattr(concurrent.futures, "InterpreterPoolExecutor", None))
                   if c is not None)
# Durations are int64_t nanoseconds in C, where one whose deadline passes
# INT64_MAX means "never".  A float s converts exactly while s * 1e9 < 2**63
# (about 9223372036.85 s, 292 years); _TOO_LONG is the least float s past it,
# and _ns saturates it and every longer one (infinity included) to INT64_MAX.
_INT64_MAX = 2**63 - 1


def _first_too_long() -> float:
    s = 2.0**63 / 1e9
    while s * 1e9 >= 2.0**63:
        s = math.nextafter(s, 0.0)
    while s * 1e9 < 2.0**63:
        s = math.nextafter(s, math.inf)
    return s


_TOO_LONG = _first_too_long()
# A timer's deadline is float seconds on the clock of px_now(), taken in C where
# its handle is made (so that it knows its when() without a second call), and
# rounded up to the nanosecond there (see add_at in _timers.c).


class _State:
    """What handlers of one TimerQueue share; outlives the TimerQueue object.
    `g` is the queue's gate (its handles keep it through this), `sched` the
    Scheduler of a fiber run it delivers into (or None)."""

    __slots__ = ("__weakref__", "g", "sched")

    def __init__(self) -> None:
        self.sched: Any = None          # a fiber run's Scheduler it delivers into


def _refused(code: int, what: str) -> NoReturn:
    # A gate refused the call (or C said closed): explain it.
    if code == lib.PX_EFORKED:
        raise ForkedError(f"{what} belongs to the parent of a fork()")
    if code == lib.PX_ECLOSED:
        raise Closed(f"{what} is closed")
    raise_for(code)


def _new_gate(obj: Any) -> Any:
    # A gate for the C object `obj` (see _gate.h), as (its _host.Gate, cffi's
    # pxpy_gate * view of it), or (None, NULL) when memory ran out.  The Gate
    # is not tracked by the garbage collector and has no finalizer: it is freed
    # when the last Python object holding it (or the view) is deallocated,
    # after the __del__ of every holder has run.  A finalizer would be run by
    # the collector in a reference cycle possibly before the __del__ of the
    # queue that holds the gate, whose close() would then shut freed memory.
    try:
        gate = _host.Gate()
    except MemoryError:
        return None, _NULL
    g = ffi.from_buffer("pxpy_gate *", gate)
    lib.pxpy_gate_init(g, obj)
    return gate, g


def _run_handler(fn: Handler, ctx: Any, owner: "_State", aborted: bool) -> None:
    # A handler's call, from _host's trampolines (GIL taken), the handle claimed
    # already (the final call released it).  An exception escaping goes to
    # sys.unraisablehook and C goes on: the worker (or the draining thread).  But
    # a KeyboardInterrupt or SystemExit (any BaseException that is no Exception)
    # in a handler that HandlerQueue.drain() runs stops that drain and is raised
    # by it, as Python users expect.
    prev = getattr(_tls, "current", None)
    _tls.current = owner
    try:
        ctx.run(fn, aborted)
    except Exception:
        raise
    except BaseException as e:
        box = getattr(_tls, "drain", None)
        if box is None:
            raise
        box.append(e)
        lib.pxpy_drain_stop()
    finally:
        _tls.current = prev


class _Submitted:
    """A call (a _host.Call) handed to a concurrent.futures executor.  It is
    made once, by whichever comes first: the executor running it, or its future
    ending without having run it (cancelled, failed to start), which makes it
    the handler's aborted call, inline in the thread that ended the future."""

    __slots__ = ("call", "token")

    def __init__(self, call: Any) -> None:
        self.call, self.token = call, [None]

    def claim(self) -> bool:
        try:
            self.token.pop()            # atomic: one caller gets it
        except IndexError:
            return False
        return True

    def __call__(self) -> None:
        if self.claim():
            self.call(0)

    def ended(self, future: Any) -> None:
        if self.claim():
            self.call(_ECANCELED)


def _submit(executor: concurrent.futures.Executor, c: Any) -> int:
    # A Batch's submit, on the worker: hand the library's call c to the
    # concurrent.futures executor.  The library decides, when it runs, whether
    # the timer was cancelled meanwhile -- so cancel wins while it waits there.
    call = _Submitted(c)
    try:
        future = executor.submit(call)
    except BaseException:               # shut down: the worker runs it, aborted
        return lib.PX_ECLOSED if call.claim() else 0
    try:
        future.add_done_callback(call.ended)
    except Exception:                   # not a Future: it runs as the executor says
        pass
    return 0


def _ns(seconds: float, what: str = "delay") -> int:
    """The binding's one duration rule, that of the C API: whole nanoseconds of
    `seconds` (an int or a float); a negative or NaN one is InvalidArgument, one
    of 2**63 ns or more (infinity, 10**400) saturates to INT64_MAX, "never"."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise TypeError(f"{what} must be a number of seconds, not {type(seconds).__name__}")
    if type(seconds) is not int and type(seconds) is not float:   # a subclass: its value,
        seconds = (int.__int__(seconds) if isinstance(seconds, int)  # not its operators
                   else float.__float__(seconds))
    if not seconds >= 0:                # NaN too
        raise InvalidArgument(f"{what} must be >= 0, got {seconds!r}")
    if isinstance(seconds, int):        # exact: 10**400 has no float
        return min(seconds * 1_000_000_000, _INT64_MAX)
    if not seconds < _TOO_LONG:         # 2**63 ns or more, infinity
        return _INT64_MAX
    return int(seconds * 1e9)


def _bad_timer_id(timer_id: object) -> NoReturn:
    raise TypeError("the timer id must be the TimerHandle that add() or add_periodic() "
                    f"returned, not {type(timer_id).__name__}") from None


def _check_handler(fn: object) -> None:
    if not callable(fn):
        raise TypeError(f"handler must be callable, not {type(fn).__name__}")


_host.timers_setup(_tls, _refused, _run_handler)   # what the C handles and queues call back


_C = TypeVar("_C", bound="_Closing")


class _Closing:
    """What owns a resource that close() ends: a with-block closes it at its
    end, and so does its collection when it was dropped without close().
    Nothing owed refers to the object itself (a queue's calls hold its _State,
    a loop's reader the HandlerQueue), so the collection comes as soon as the
    last reference goes."""

    __slots__ = ()

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self: _C) -> _C:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:       # a close that fails in a collection has no caller
            pass


class HandlerQueue(_Closing):
    """A drainable queue of handler calls (px_queue): pass it as a TimerQueue's
    executor, then run the handlers on your thread with drain(), after wait() or
    when fileno() is readable (select, poll, epoll, an event loop)."""

    def __init__(self) -> None:
        self._closed = True
        self._g = _NULL
        self._q = lib.px_queue_new()
        if self._q == _NULL:
            raise NoMemory("px_queue_new failed")
        self._gate, g = _new_gate(self._q)
        if g == _NULL:
            lib.px_queue_free(self._q)
            self._q = _NULL
            raise NoMemory("no memory for the HandlerQueue's gate")
        self._g = g
        self._closed = False
        self._free_later = 0            # the thread whose drain frees it, see close()
        self._forked = False
        self._users: "weakref.WeakSet[TimerQueue]" = weakref.WeakSet()
        _HQUEUES.add(self)

    def _ptr(self) -> Any:
        if self._forked:
            raise ForkedError("HandlerQueue belongs to the parent of a fork()")
        if self._closed:
            raise Closed("HandlerQueue is closed")
        return self._q

    def _done(self, rc: int) -> int:
        if rc < 0:
            _refused(rc, "HandlerQueue")
        return rc

    def _enter(self) -> None:
        # Holds the gate from Python (leave with _leave): close() waits for it.
        rc = lib.pxpy_enter(self._g)
        if rc != 0:
            _refused(rc, "HandlerQueue")

    def _leave(self) -> None:
        lib.pxpy_leave(self._g)

    def drain(self, max: int = 0) -> int:
        """Run up to `max` queued handlers (0: all queued now) here; return how many.

        A handler's KeyboardInterrupt or SystemExit ends the drain and is raised
        here; the calls after it stay queued for the next drain."""
        if max < 0:
            raise InvalidArgument("max must be >= 0")
        try:
            draining = _tls.draining
        except AttributeError:
            draining = _tls.draining = []
        draining.append(self)           # close() from a handler must not wait for it
        prev = getattr(_tls, "drain", None)
        box: "list[BaseException]" = []
        _tls.drain = box                # where _run_handler puts what must propagate
        try:
            rc = lib.pxpy_queue_drain(self._g, max)
        finally:
            _tls.drain = prev
            draining.pop()
            if self._free_later == threading.get_ident() and self not in draining:
                self._free_later = 0
                self._unhold()
        if box:
            raise box.pop()
        return self._done(rc)

    def fileno(self) -> int:
        """A descriptor readable while handlers wait.  Never read it yourself."""
        return self._done(lib.pxpy_queue_fd(self._g))

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Block (GIL released) until a handler waits or `timeout` s passed.

        Signals are handled while it waits: Ctrl-C raises KeyboardInterrupt."""
        end = -1 if timeout is None else min(lib.px_now() + _ns(timeout, "timeout"),
                                             _INT64_MAX)
        # Back from C at each signal (PX_EINTR), so the Python signal handlers
        # run here (PEP 475): the loop's next turn raises what they raise.
        while True:
            rc = lib.pxpy_queue_wait(self._g, end)
            if rc != _EINTR:
                return self._done(rc) == 1

    def __len__(self) -> int:
        return int(self._done(lib.pxpy_queue_size(self._g)))

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Close every TimerQueue posting here, run what is still queued, release.

        Calls under way in other threads finish first (a wait() returns, raising
        Closed); calls that come later raise Closed.  Called from a handler that
        drain() runs, the queue is released when that drain() returns.  A
        TimerQueue posting here that this close() could not close (closing in
        another thread, or collected in the same cycle as this queue) keeps
        what it posts into: the calls still queued run when its close()
        returns, in its thread, once every such TimerQueue has closed."""
        if self._closed:
            return
        self._closed = True
        _HQUEUES.discard(self)
        if self._forked:                # in a fork child the calls are the parent's
            self._q = _NULL
            return
        own = getattr(_tls, "draining", []).count(self)
        if not lib.pxpy_queue_shut(self._g, own):
            return                      # another thread closes it
        for tq in list(self._users):
            tq.close()
        if own:
            self._free_later = threading.get_ident()
        else:
            self._unhold()

    # The C queue outlives every TimerQueue posting into it (the C API's rule):
    # this object holds it until its close() is done with it, each such
    # TimerQueue until its px_timerq_free returned, and whoever drops the last
    # hold frees it (see pxpy_hold).  A TimerQueue finalized by the collector
    # after this queue -- both in one cycle, weak references cleared, so
    # close() did not see it among _users -- still posts into a live queue,
    # and its close() frees it, running the calls it posted.
    def _hold(self) -> None:
        lib.pxpy_hold(self._g)

    def _unhold(self) -> None:
        if lib.pxpy_unhold(self._g):
            self._free()

    def _free(self) -> None:
        q, self._q = self._q, _NULL
        prev = getattr(_tls, "drain", None)
        _tls.drain = None               # close delivers every call, whatever raises
        try:
            lib.px_queue_free(q)        # runs what is still queued
        finally:
            _tls.drain = prev

    def __repr__(self) -> str:
        if self._forked:
            return "<parataxis.HandlerQueue forked>"
        try:
            return f"<parataxis.HandlerQueue fd={self.fileno()} queued={len(self)}>"
        except Closed:                  # closed, or closing in another thread
            return "<parataxis.HandlerQueue closed>"



class TimerQueue(_TimerQueueBase, _Closing):
    """One-shot and periodic timers served by one worker thread.

    executor: None (handlers run on the worker thread), an asyncio event loop
    (handlers run on the loop's thread), a concurrent.futures.Executor, or a
    HandlerQueue.  Handlers are called as fn(aborted), exactly once per timer
    (a periodic one once per tick, then once with aborted=True).

    add and cancel are C methods of _TimerQueueBase (_timers.c), which keeps
    _state, _sched, _loop and _gate (its _host.Gate) in C for them.
    """

    def __init__(self, executor: Executor = None) -> None:
        self._q = _NULL
        self._g = _NULL
        self._closed = True
        self._forked = False
        self._state = _State()
        self._timers: Set[Any] = set()              # the gates of our open Timers
        self._hq: Optional[HandlerQueue] = None     # our own, for an asyncio loop
        self._user_hq: Optional[HandlerQueue] = None
        self._into: Optional[HandlerQueue] = None   # what we post into: holds its C queue
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._sched: Any = None                     # a fiber run's Scheduler
        self._where = "worker" if executor is None else type(executor).__name__
        # Inside a HandlerQueue's gate until we are one of its users: its close()
        # then closes us before it frees what we post into.
        hq = executor if isinstance(executor, HandlerQueue) else None
        if hq is not None:
            hq._enter()
        try:
            ex = self._make_executor(executor)  # kept until px_timerq_new copied it
            opts = ffi.new("px_timerq_opts *")
            opts.executor = ex
            opts.abort_linger_ns = _ABORT_LINGER_NS
            self._q = lib.px_timerq_new(opts)
            gate, g = (None, _NULL) if self._q == _NULL else _new_gate(self._q)
            if g == _NULL:
                lib.px_timerq_free(self._q)         # NULL does nothing
                self._q = _NULL
                _CTX.pop(id(self._state), None)
                raise NoMemory("px_timerq_new failed")
            self._g = self._state.g = g
            self._gate = gate
        except BaseException:
            into, self._into = self._into, None
            if into is not None:        # no C queue posts into it
                into._unhold()
            raise
        finally:
            if hq is not None:
                hq._leave()
        self._closed = False
        if self._loop is not None:
            self._watch_loop()
        _QUEUES.add(self)

    def _batched(self, submit: Any) -> Any:
        # Handlers on the worker, or posts to a concurrent.futures executor, go
        # a batch at a time under one hold of the GIL (see _host.Batch).  The
        # batch lives in _CTX as long as the worker may use it.
        try:
            b = _host.Batch(submit)
        except MemoryError:
            raise NoMemory("no memory for the batch executor") from None
        _CTX.setdefault(id(self._state), []).append(b)
        return ffi.from_buffer("px_executor *", b)

    def _make_executor(self, executor: Any) -> Any:
        # The px_executor * that px_timerq_new copies.
        if executor is None:
            return self._batched(None)
        if isinstance(executor, HandlerQueue):
            q = executor._ptr()
            executor._users.add(self)
            self._user_hq = executor
            executor._hold()            # inside its gate: it is open
            self._into = executor
            return ffi.new("px_executor *", lib.px_queue_executor(q))
        if isinstance(executor, asyncio.AbstractEventLoop):
            if executor.is_closed():
                raise Closed("the event loop is closed")
            self._loop = executor
            self._hq = HandlerQueue()
            self._hq._hold()
            self._into = self._hq
            return ffi.new("px_executor *", lib.px_queue_executor(self._hq._q))
        from ._fibers import Scheduler     # imports this module: imported late
        if isinstance(executor, Scheduler):
            self._sched = self._state.sched = executor
            return executor._executor()
        if isinstance(executor, concurrent.futures.Executor):
            if isinstance(executor, _ELSEWHERE):
                kind = next(c for c in _ELSEWHERE if isinstance(executor, c)).__name__
                raise TypeError(
                    f"executor {type(executor).__name__} (a {kind}) runs calls in another "
                    "process or interpreter, which cannot call this one's handlers: use "
                    "a ThreadPoolExecutor and submit to the process pool from a handler")
            return self._batched(functools.partial(_submit, executor))
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
        if self._on_loop_thread():
            _watch(self._loop, self._hq)
        else:
            self._loop.call_soon_threadsafe(_watch, self._loop, self._hq)

    def _check_loop(self) -> None:
        # A closed loop runs nothing more: close (its owed calls run here, as
        # close() runs them when the loop cannot) and refuse.
        assert self._loop is not None
        if self._loop.is_closed():
            self.close()
            raise Closed("the event loop of this TimerQueue is closed")

    def _ptr(self) -> Any:
        if self._forked:
            raise ForkedError("TimerQueue belongs to the parent of a fork()")
        if self._closed:
            raise Closed("TimerQueue is closed")
        return self._q

    def _enter(self) -> None:
        # Holds the gate from Python (leave with _leave): close() waits for it.
        rc = lib.pxpy_enter(self._g)
        if rc != 0:
            self._ptr()
            _refused(rc, "TimerQueue")

    def _leave(self) -> None:
        lib.pxpy_leave(self._g)

    def _not_added(self) -> NoReturn:
        # add's C found the timer was not added: its handle is dropped already.
        if self._sched is not None:
            self._sched._unhold()
        self._ptr()                     # raises Closed / ForkedError
        raise NoMemory("the timer could not be added")

    # add and cancel are the hot path (see tests/bench/bench_python.py), in C:
    # _TimerQueueBase.add checks what is cheap (a float or int delay in range,
    # a callable handler, no asyncio loop), makes the TimerHandle and adds the
    # timer in one call; the rest comes here.  A closed queue has a shut gate,
    # which refuses the call.
    def _add_slow(self, delay: float, fn: Handler) -> TimerHandle:
        _check_handler(fn)
        if type(delay) is not float and type(delay) is not int or not 0 <= delay < _TOO_LONG:
            delay = _ns(delay) / 1e9    # raises, or saturates to "never"
        if self._loop is not None:
            self._check_loop()
        return self._arm(delay, fn)

    def _cancel_slow(self, handle: TimerHandle) -> bool:
        # What cancel's C leaves: another queue's handle, or a refusal to explain.
        if type(handle) is not TimerHandle:
            _bad_timer_id(handle)
        self._ptr()                     # raises when this queue is closed
        if handle._owner is self._state:
            return handle.cancel()      # refused meanwhile: raises
        return False                    # another queue's: left alone

    def add_periodic(self, first: float, period: float, fn: Handler) -> TimerHandle:
        """Call fn(False) after `first` s, then every `period` s (> 0); the timer
        ends with one fn(True) once cancelled or its queue closed."""
        _check_handler(fn)
        p = _ns(period, "period")
        if p == 0:
            raise InvalidArgument("period must be > 0")
        f = _ns(first, "first")
        if self._loop is not None:
            self._check_loop()
        h: TimerHandle = self._arm_periodic(f, p, fn)
        return h

    def cancel_all(self) -> int:
        """Cancel every timer whose handler has not started; return how many."""
        r = lib.pxpy_cancel_all(self._g)
        if r < 0:
            self._ptr()
            _refused(r, "TimerQueue")
        return int(r)

    @property
    def pending(self) -> int:
        """How many timers wait for their deadline."""
        r = lib.pxpy_pending(self._g)
        if r < 0:
            self._ptr()
            _refused(r, "TimerQueue")
        return int(r)

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Abort every timer, deliver every handler call owed, stop the worker.

        Calls under way in other threads finish first; later ones raise Closed.
        Handlers on the worker thread (no executor) have all run when this
        returns; with an asyncio loop the aborted handlers run here (or, when
        called from one of this queue's handlers or off the loop's thread while
        it runs, soon on the loop).  Called from one of its own handlers it does
        not wait for itself.  Idempotent; a close() racing another returns at
        once."""
        self._close(False)

    def __del__(self) -> None:
        try:
            self._close(True)
        except Exception:       # a close that fails in a collection has no caller
            pass

    def _close(self, reap: bool) -> None:
        # reap: from the finalizer, which runs wherever the collector or the
        # last reference's drop comes, with whatever locks that thread holds.
        # A worker that runs Python (the batch executors: no executor, or a
        # concurrent.futures one) may wait for one of them, so the join is
        # left to a reaper thread (_reap); the rest of close() does not wait.
        if self._closed:
            return
        self._closed = True
        _QUEUES.discard(self)
        if self._forked:
            q, self._q = self._q, _NULL
            lib.px_timerq_free(q)       # child: frees memory, runs no handler
            return
        if not lib.pxpy_shut(self._g):  # waits for the calls under way
            return                      # another thread closes it
        for g in list(self._timers):
            lib.pxpy_timer_drop(g)
        self._timers.clear()
        q, self._q = self._q, _NULL
        # In one of its handlers, or on its worker (where the collector may
        # run this): px_timerq_free cannot join the worker, which goes on
        # delivering through what _CTX keeps.
        inside = (getattr(_tls, "current", None) is self._state
                  or any(b.on_worker() for b in _CTX.get(id(self._state), ())))
        if reap and not inside and id(self._state) in _CTX and _reap(q, self._state):
            return                      # no HandlerQueue, no loop: nothing else to do
        lib.px_timerq_free(q)           # GIL released while it joins the worker
        into, self._into = self._into, None
        if into is not None:            # it posts no more: let its C queue go
            into._unhold()
        _prune_deferred()
        if inside:
            _DEFERRED.add(self._state)  # the worker still owes calls: see exit
        else:
            _CTX.pop(id(self._state), None)
        loop, hq = self._loop, self._hq
        if hq is not None:
            assert loop is not None
            if inside or not self._on_loop_thread():
                try:
                    loop.call_soon_threadsafe(_release, loop, hq)
                    return
                except RuntimeError:    # the loop closed meanwhile
                    pass
            _release(loop, hq)

    def __repr__(self) -> str:
        where = f"<parataxis.TimerQueue executor={self._where}"
        if self._forked:
            return where + " forked>"
        try:
            return f"{where} pending={self.pending}>"
        except Closed:                  # closed, or closing in another thread
            return where + " closed>"



def _watch(loop: asyncio.AbstractEventLoop, hq: HandlerQueue) -> None:
    if not hq.closed:                   # closed before the loop came to this
        loop.add_reader(hq.fileno(), hq.drain)


def _release(loop: asyncio.AbstractEventLoop, hq: HandlerQueue) -> None:
    # On the loop's thread (or any, once the loop is closed): stop watching the
    # queue a closed TimerQueue posted into, and run what it still holds.
    if hq.closed:
        return
    if not loop.is_closed():
        loop.remove_reader(hq.fileno())
    hq.close()                          # runs the aborted calls still queued


class Timer(_Closing):
    """A reusable deadline timer on a TimerQueue (like Asio's steady_timer): set
    the expiry, then async_wait any number of handlers; all fire together."""

    def __init__(self, queue: TimerQueue) -> None:
        self._g = _NULL
        self._gate: Any = None
        if not isinstance(queue, TimerQueue):
            raise TypeError("Timer needs a TimerQueue")
        self._queue = queue
        if queue._loop is not None:
            queue._check_loop()
        # Made and registered inside the queue's gate, so that the queue's
        # close() finds it and drops it before it frees the queue.
        queue._enter()
        try:
            t = lib.px_timer_new(queue._q)
            gate, g = (None, _NULL) if t == _NULL else _new_gate(t)
            if g == _NULL:
                lib.px_timer_free(t)    # NULL does nothing
                raise NoMemory("px_timer_new failed")
            self._g = g
            self._gate = gate
            queue._timers.add(self._g)
        finally:
            queue._leave()

    def _done(self, rc: int) -> int:
        if rc < 0:
            if rc == lib.PX_ECLOSED or rc == lib.PX_EFORKED:
                self._queue._ptr()      # the queue's closed (or forked)?
                _refused(rc, "Timer")
            check(rc)
        return rc

    def expires_after(self, delay: float) -> int:
        """Set the expiry to now + `delay` s; abort the pending waits (they get
        aborted=True) and return how many."""
        return self._done(lib.pxpy_timer_expires_after(self._g, _ns(delay)))

    @property
    def expiry(self) -> float:
        """The expiry in seconds on the clock of parataxis.now()."""
        return self._done(lib.pxpy_timer_expiry(self._g)) / 1e9

    def async_wait(self, fn: Handler) -> None:
        """Call fn(False) at the expiry, or fn(True) if the wait is aborted first."""
        _check_handler(fn)
        queue = self._queue
        if queue._loop is not None:
            queue._check_loop()
        sched = queue._sched
        if sched is not None:
            sched._hold()
        rc = _host.timer_wait(self._gate, queue._state, sched, fn)
        if rc < 0:                      # fn will never be called
            if sched is not None:
                sched._unhold()
            self._done(rc)

    def cancel(self) -> int:
        """Abort the pending waits (aborted=True); return how many."""
        return self._done(lib.pxpy_timer_cancel(self._g))

    def close(self) -> None:
        """Abort the pending waits and release the timer.  Idempotent.  Once
        its queue is closed (or in a fork child) there is nothing to do: the
        queue's close() released it."""
        g = self._g
        if g != _NULL and lib.pxpy_timer_close(g, self._queue._g) == 0:
            self._queue._timers.discard(g)

    def __repr__(self) -> str:
        try:
            return f"<parataxis.Timer expiry={self.expiry:.6f}>"
        except (Closed, ForkedError):
            return "<parataxis.Timer closed>"



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
    _drain_reaper(5.0)
    _wait_deferred(5.0)


def _reap(q: Any, state: Any) -> bool:
    # Hands a dropped queue's px_timerq_free (the join of its worker, which
    # delivers the aborted calls) to a reaper thread; False once the interpreter
    # exits (the caller then frees it itself).  The thread is started with
    # _thread, not threading: Thread.start() takes threading's own locks, which
    # the finalizing thread may hold.  A reaper ends when nothing is left; two
    # at once (one ending as the next drop starts another) do no harm.
    if _reaper["stopped"]:
        return False
    _REAP.append((q, state))
    if not _reaper["running"]:
        _reaper["running"] = True
        try:
            _thread.start_new_thread(_reaper_run, ())
        except Exception:           # no thread: the caller frees it here
            _reaper["running"] = False
            try:
                _REAP.remove((q, state))
            except ValueError:      # a reaper took it after all
                return True
            return False
    return True


def _reaper_run() -> None:
    while True:
        me = _thread.get_ident()
        _REAPING.add(me)            # before the pop: the exit waits for it
        try:
            q, state = _REAP.popleft()
        except IndexError:
            _REAPING.discard(me)
            _reaper["running"] = False
            if not _REAP:           # a drop after this check starts another
                return
            _reaper["running"] = True
            continue
        try:
            _reap_one(q, state)
        finally:
            _REAPING.discard(me)


def _reap_one(q: Any, state: Any) -> None:
    try:
        lib.px_timerq_free(q)       # GIL released while it joins the worker
        _prune_deferred()
        _CTX.pop(id(state), None)   # the worker is gone: its batches too
    except BaseException:           # nothing to report it to
        pass


def _drain_reaper(timeout: float) -> None:
    # At exit: no more reaper threads; free here what is left, and let the
    # frees under way end before finalization.
    _reaper["stopped"] = True
    while _REAP:
        try:
            q, state = _REAP.popleft()
        except IndexError:
            break
        _reap_one(q, state)
    end = time.monotonic() + timeout
    while _REAPING and time.monotonic() < end:
        time.sleep(0.001)


def _prune_deferred() -> None:
    # The queues closed from their own handlers whose workers owe no more
    # calls: their batches are used no more (a flush under way keeps its own).
    if not _DEFERRED:
        return
    owners = _host.live_owners()
    for state in list(_DEFERRED):
        if state not in owners:
            _DEFERRED.discard(state)
            _CTX.pop(id(state), None)


def _wait_deferred(timeout: float) -> None:
    # A queue closed from its own worker thread returned at once; its worker
    # still delivers the aborted calls.  Let it finish before finalization.
    end = time.monotonic() + timeout
    while _DEFERRED and time.monotonic() < end:
        owners = _host.live_owners()
        if not owners & _DEFERRED:
            break
        time.sleep(0.001)
    _DEFERRED.clear()


def _after_fork_in_child() -> None:
    # Only the forking thread survives: the workers are gone and every pending
    # handler belongs to the parent.  Mark everything unusable; drop the handles.
    # Every gate refuses from now on, so no call of the child touches them.
    for tq in list(_QUEUES):
        tq._forked = True
        lib.pxpy_gate_forked(tq._g)
        for g in tq._timers:
            lib.pxpy_gate_forked(g)
    for hq in list(_HQUEUES):
        hq._forked = True
        lib.pxpy_gate_forked(hq._g)
    _host.live_clear()
    while _REAP:                        # the parent's: freed, no handler run
        lib.px_timerq_free(_REAP.popleft()[0])
    _reaper["running"] = False
    _REAPING.clear()
    _CTX.clear()
    _DEFERRED.clear()


for _cls in (HandlerQueue, TimerQueue, Timer):       # TimerHandle: its C name says
    _cls.__module__ = "parataxis"       # shown as parataxis.TimerQueue
del _cls

atexit.register(_close_all_at_exit)
os.register_at_fork(after_in_child=_after_fork_in_child)
