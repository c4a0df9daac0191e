"""TimerQueue, Timer and HandlerQueue over the cffi module parataxis._parataxis.

How a Python handler reaches C and comes back exactly once:

- Each add wraps the callable in a tuple `call` and stores it in the module-level
  dict _LIVE under key id(call) (a root the garbage collector cannot break, even
  when the TimerQueue object itself is gone); the key is the C `arg` (what
  ffi.new_handle would give, but an int crosses faster).  The key stays there
  until the handler's final call -- a one-shot's only call, a periodic timer's
  aborted call -- which removes it.  That call is the release point; nothing
  else is.  A key cannot be reused while its call is in _LIVE.
- The C side calls the compiled extern "Python" function pxpy_handler; cffi takes
  the GIL for it.  Every other C call runs with the GIL released (cffi's rule), so
  px_timerq_free and px_queue_wait never block Python threads.
- A queue without an executor, or with a concurrent.futures one, gets the C
  executor pxpy_batch: the worker's calls of one batch run (or are submitted)
  under one hold of the GIL, not one each, and the one-shot handlers among them
  reach Python in one call, pxpy_run_keys; see _build_ffi.py.
"""
from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextvars
import math
import os
import select
import threading
import weakref
from typing import Any, Callable, Dict, NoReturn, Optional, Union

from ._errors import Closed, ForkedError, InvalidArgument, NoMemory, check
from ._parataxis import ffi, lib

Handler = Callable[[bool], Any]
Executor = Union[None, "HandlerQueue", asyncio.AbstractEventLoop, concurrent.futures.Executor]

_NULL = ffi.NULL
_ECANCELED = lib.PX_ECANCELED
# A call is the tuple (fn, periodic, owner state, context); _LIVE maps id(call)
# to it until its final call.  The handler runs in the contextvars context
# copied when it was added, as loop.call_later's callbacks do.
_LIVE: Dict[int, Any] = {}
_CTX: Dict[int, Any] = {}               # id(queue state) -> what its executor's ctx needs
_QUEUES: "weakref.WeakSet[TimerQueue]" = weakref.WeakSet()
_HQUEUES: "weakref.WeakSet[HandlerQueue]" = weakref.WeakSet()
_DEFERRED: "set[_State]" = set()       # closed from their own worker: calls owed
_tls = threading.local()
# How late an aborted handler may run (px_timerq_opts.abort_linger_ns): every
# delivery hands the GIL to the worker and back, several microseconds here, so
# the worker gathers a millisecond's aborts into one.
_ABORT_LINGER_NS = 1_000_000
_add, _cancel = lib.pxpy_add, lib.px_timerq_cancel
_copy_context = contextvars.copy_context
_invoke = lib.pxpy_invoke
# Executors that run a call in another process or interpreter: they cannot call
# a handler (or the C trampoline) of this one.
_ELSEWHERE = tuple(c for c in (getattr(concurrent.futures, "ProcessPoolExecutor", None),
                               getattr(concurrent.futures, "InterpreterPoolExecutor", None))
                   if c is not None)


class _State:
    """What handlers of one TimerQueue share; outlives the TimerQueue object."""

    __slots__ = ("__weakref__",)


@ffi.def_extern()
def pxpy_run_keys(k: Any) -> None:
    # The one-shot handlers a batch collected (see pxpy_trampoline): each call is
    # its final one.  An exception goes out through cffi to sys.unraisablehook,
    # with k.done just past the handler that raised; C then calls again for the
    # rest.  The loop is pxpy_handler unrolled: the hot path of a cancel storm.
    key, status, n = k.key, k.status, k.n
    i = k.done
    pop, tls = _LIVE.pop, _tls
    # tls.current is set when the owner changes, not per handler (handlers leave
    # it as they found it): a threading.local store costs more than ctx.run.
    prev = cur = getattr(tls, "current", None)
    try:
        while i < n:
            fn, _, owner, ctx = pop(key[i])
            if owner is not cur:
                tls.current = cur = owner
            ctx.run(fn, status[i] != 0)
            i += 1
    finally:
        tls.current = prev
        k.done = i + 1 if i < n else n


@ffi.def_extern()
def pxpy_handler(key: int, status: int) -> None:
    # cffi reports an exception escaping this function through sys.unraisablehook
    # and returns to C: the worker (or the draining thread) goes on.  But a
    # KeyboardInterrupt or SystemExit (any BaseException that is no Exception)
    # in a handler that HandlerQueue.drain() runs stops that drain and is raised
    # by it, as Python users expect.
    fn, periodic, owner, ctx = _LIVE[key]
    aborted = status != 0
    if aborted or not periodic:
        del _LIVE[key]                  # the final call: release the call
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
    """A call handed to a concurrent.futures executor.  It is made once, by
    whichever comes first: the executor running it, or its future ending
    without having run it (cancelled, failed to start), which makes it the
    handler's aborted call, inline in the thread that ended the future."""

    __slots__ = ("fn", "arg", "token")

    def __init__(self, fn: Any, arg: Any) -> None:
        self.fn, self.arg, self.token = fn, arg, [None]

    def claim(self) -> bool:
        try:
            self.token.pop()            # atomic: one caller gets it
        except IndexError:
            return False
        return True

    def __call__(self) -> None:
        if self.claim():
            _invoke(self.fn, self.arg, 0)

    def ended(self, future: Any) -> None:
        if self.claim():
            _invoke(self.fn, self.arg, _ECANCELED)


@ffi.def_extern()
def pxpy_post(ctx: Any, fn: Any, arg: Any, status: int) -> int:
    # Runs on the worker: hand the C trampoline (fn, arg) to the
    # concurrent.futures executor.  The trampoline decides, when it runs, whether
    # the timer was cancelled meanwhile -- so cancel wins while it waits there.
    call = _Submitted(fn, arg)
    try:
        future = ffi.from_handle(ctx).submit(call)
    except BaseException:               # shut down: the worker runs it, aborted
        return lib.PX_ECLOSED if call.claim() else 0
    try:
        future.add_done_callback(call.ended)
    except Exception:                   # not a Future: it runs as the executor says
        pass
    return 0


def _ns(seconds: float, what: str = "delay") -> int:
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise TypeError(f"{what} must be a number of seconds, not {type(seconds).__name__}")
    if not (seconds >= 0 and math.isfinite(seconds)):
        raise InvalidArgument(f"{what} must be finite and >= 0, got {seconds!r}")
    if seconds >= 4e9:                  # ~126 years: beyond what the clock holds
        raise InvalidArgument(f"{what} too large: {seconds!r}")
    return int(seconds * 1e9)


def _bad_timer_id(timer_id: object) -> NoReturn:
    raise TypeError(f"timer id must be an int, not {type(timer_id).__name__}")


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
        """Run up to `max` queued handlers (0: all queued now) here; return how many.

        A handler's KeyboardInterrupt or SystemExit ends the drain and is raised
        here; the calls after it stay queued for the next drain."""
        if max < 0:
            raise InvalidArgument("max must be >= 0")
        q = self._ptr()
        prev = getattr(_tls, "drain", None)
        box: "list[BaseException]" = []
        _tls.drain = box                # where pxpy_handler puts what must propagate
        try:
            n = lib.pxpy_queue_drain(q, max)
        finally:
            _tls.drain = prev
        if box:
            raise box.pop()
        return check(n)

    def fileno(self) -> int:
        """A descriptor readable while handlers wait.  Never read it yourself."""
        return check(lib.px_queue_fd(self._ptr()))

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Block (GIL released) until a handler waits or `timeout` s passed.

        Signals are handled while it waits: Ctrl-C raises KeyboardInterrupt."""
        ns = None if timeout is None else _ns(timeout, "timeout")
        # select.poll rather than px_queue_wait: it runs the Python signal
        # handlers when a signal interrupts it (PEP 475), so Ctrl-C gets through.
        p = select.poll()
        p.register(self.fileno(), select.POLLIN)
        if ns is None:
            while not p.poll():
                pass
            return True
        end = lib.px_now() + ns
        while True:
            left = end - lib.px_now()
            # poll rounds a fraction of a millisecond up: never early.
            if p.poll(min(max(left, 0) / 1e6, 2**31 - 1)):
                return True
            if left <= 0 or lib.px_now() >= end:
                return False

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
            prev = getattr(_tls, "drain", None)
            _tls.drain = None           # close delivers every call, whatever raises
            try:
                lib.px_queue_free(q)
            finally:
                _tls.drain = prev

    def __repr__(self) -> str:
        if self._forked:
            return "<parataxis.HandlerQueue forked>"
        if self._q == _NULL:
            return "<parataxis.HandlerQueue closed>"
        return f"<parataxis.HandlerQueue fd={self.fileno()} queued={len(self)}>"

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
        self._where = "worker" if executor is None else type(executor).__name__
        ex = self._make_executor(executor)
        opts = ffi.new("px_timerq_opts *")
        keep = ffi.new("px_executor *", ex)         # copied by px_timerq_new
        opts.executor = keep
        opts.abort_linger_ns = _ABORT_LINGER_NS
        self._q = lib.px_timerq_new(opts)
        if self._q == _NULL:
            _CTX.pop(id(self._state), None)
            raise NoMemory("px_timerq_new failed")
        self._closed = False
        if self._loop is not None:
            self._watch_loop()
        _QUEUES.add(self)

    def _batched(self, inner: Any) -> Any:
        # Handlers on the worker, or posts to a concurrent.futures executor, go
        # a batch at a time under one hold of the GIL (see pxpy_batch).  The batch
        # lives in _CTX as long as the worker may use it.
        b = lib.pxpy_batch_new(inner)
        if b == _NULL:
            raise NoMemory("pxpy_batch_new failed")
        b = ffi.gc(b, lib.pxpy_batch_free)
        _CTX.setdefault(id(self._state), []).append(b)
        return lib.pxpy_batch_executor(b)

    def _make_executor(self, executor: Any) -> Any:
        if executor is None:
            return self._batched({"post": _NULL, "ctx": _NULL, "flush": _NULL})
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
            if isinstance(executor, _ELSEWHERE):
                kind = next(c for c in _ELSEWHERE if isinstance(executor, c)).__name__
                raise TypeError(
                    f"executor {type(executor).__name__} (a {kind}) runs calls in another "
                    "process or interpreter, which cannot call this one's handlers: use "
                    "a ThreadPoolExecutor and submit to the process pool from a handler")
            h = ffi.new_handle(executor)
            _CTX.setdefault(id(self._state), []).append(h)
            return self._batched({"post": lib.pxpy_post, "ctx": h, "flush": _NULL})
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

    def _not_added(self, key: int) -> NoReturn:
        del _LIVE[key]                  # fn will never be called
        self._ptr()                     # raises Closed / ForkedError
        raise NoMemory("the timer could not be added")

    # add and cancel are the hot path (see tests/bench/bench_python.py): one
    # tuple, one handle, one dict store, one C call; checks only where they are
    # cheap, and the slow path explains a failure after C reported it.  A closed
    # queue has _q == NULL, which C refuses.
    def add(self, delay: float, fn: Handler) -> int:
        """Call fn(False) after `delay` seconds, or fn(True) if aborted first.
        Returns the timer id (never 0, never reused by this queue)."""
        if not callable(fn):
            _check_handler(fn)
        if type(delay) is float or type(delay) is int:
            if not 0 <= delay < 4e9:
                _ns(delay)
            ns = int(delay * 1e9)
        else:
            ns = _ns(delay)
        call = (fn, False, self._state, _copy_context())
        key = id(call)
        _LIVE[key] = call
        tid = _add(self._q, ns, key)
        if tid == 0:
            self._not_added(key)
        return tid

    def add_periodic(self, first: float, period: float, fn: Handler) -> int:
        """Call fn(False) after `first` s, then every `period` s (> 0); the timer
        ends with one fn(True) once cancelled or its queue closed."""
        _check_handler(fn)
        p = _ns(period, "period")
        if p == 0:
            raise InvalidArgument("period must be > 0")
        f = _ns(first, "first")
        call = (fn, True, self._state, _copy_context())
        key = id(call)
        _LIVE[key] = call
        tid = lib.pxpy_add_periodic(self._q, f, p, key)
        if tid == 0:
            self._not_added(key)
        return tid

    def cancel(self, timer_id: int) -> bool:
        """Abort a timer.  True while its handler has not started (it is then
        called with aborted=True); False when too late or unknown."""
        if timer_id is True or timer_id is False:
            _bad_timer_id(timer_id)     # an int to C, but no timer id
        try:
            r = _cancel(self._q, timer_id)
        except OverflowError:           # negative or >= 2**64: no such timer
            self._ptr()
            return False
        except TypeError:
            _bad_timer_id(timer_id)
        if r >= 0:
            return r == 1
        self._ptr()
        return check(r) == 1

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
        if inside:
            _DEFERRED.add(self._state)  # the worker still owes calls: see exit
        else:
            _CTX.pop(id(self._state), None)
        if self._hq is not None:
            if inside or not self._on_loop_thread():
                assert self._loop is not None
                self._loop.call_soon_threadsafe(self._release_hq)
            else:
                self._release_hq()

    def __repr__(self) -> str:
        where = f"<parataxis.TimerQueue executor={self._where}"
        if self._forked:
            return where + " forked>"
        if self._closed:
            return where + " closed>"
        return f"{where} pending={self.pending}>"

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
        call = (fn, False, self._queue._state, _copy_context())
        _LIVE[id(call)] = call
        rc = lib.pxpy_timer_wait(t, id(call))
        if rc < 0:
            del _LIVE[id(call)]
            check(rc)

    def cancel(self) -> int:
        """Abort the pending waits (aborted=True); return how many."""
        return check(lib.px_timer_cancel(self._ptr()))

    def close(self) -> None:
        """Abort the pending waits and release the timer.  Idempotent."""
        t, self._t = self._t, _NULL
        if t != _NULL and not self._queue._forked:
            lib.px_timer_free(t)

    def __repr__(self) -> str:
        if self._t == _NULL or self._queue._closed or self._queue._forked:
            return "<parataxis.Timer closed>"
        return f"<parataxis.Timer expiry={self.expiry:.6f}>"

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
    _wait_deferred(5.0)


def _wait_deferred(timeout: float) -> None:
    # A queue closed from its own worker thread returned at once; its worker
    # still delivers the aborted calls.  Let it finish before finalization.
    import time
    end = time.monotonic() + timeout
    while _DEFERRED and time.monotonic() < end:
        owners = {call[2] for call in list(_LIVE.values())}
        if not owners & _DEFERRED:
            break
        time.sleep(0.001)
    _DEFERRED.clear()


def _after_fork_in_child() -> None:
    # Only the forking thread survives: the workers are gone and every pending
    # handler belongs to the parent.  Mark everything unusable; drop the handles.
    for tq in list(_QUEUES):
        tq._forked = True
    for hq in list(_HQUEUES):
        hq._forked = True
    _LIVE.clear()
    _CTX.clear()
    _DEFERRED.clear()


for _cls in (HandlerQueue, TimerQueue, Timer):
    _cls.__module__ = "parataxis"       # shown as parataxis.TimerQueue
del _cls

atexit.register(_close_all_at_exit)
os.register_at_fork(after_in_child=_after_fork_in_child)
