"""Fibers on greenlets, scheduled by the C scheduler: run, spawn, sleep, yield_,
scopes, cancellation tokens and the scheduler as an executor.

A fiber is a pulled fiber of a px_sched run on a greenlet (see _host.c): the
C scheduler decides whose turn it is, the greenlets switch straight to one
another.  A greenlet whose fiber ended is kept, idle, to run a later one.
Every blocking call is a C call that returns PX_EYIELD when it must wait; the
fiber then hands the thread to the next one and, once switched back, collects
the outcome.  A parked fiber therefore has no C frame of the library
on its stack, which greenlet may copy away while others run.
"""
from __future__ import annotations

import contextvars
import sys
import threading
import weakref
from typing import (Any, Callable, Dict, Generic, List, Literal, Optional, Tuple, TypeVar,
                    Union)

from greenlet import getcurrent, greenlet

from . import _core, _dump, _host
from ._errors import (BusyError, Cancelled, Closed, DeadlockError,
                      NoFiberError, Timeout, raise_for)
from ._parataxis import ffi, lib

T = TypeVar("T")

_EYIELD = lib.PX_EYIELD
_ETIMEDOUT = lib.PX_ETIMEDOUT
_ECANCELED = lib.PX_ECANCELED
_JOIN = _host.JOIN


_ns = _core._ns           # the one duration rule of the binding


class Fiber(Generic[T]):
    """A fiber spawned by spawn(): join() it for its result.

    `id` is its 64-bit id (never reused in the process), `number` the small
    number reports print for it (1 for a run's first fiber), `name` its name
    (its function's __qualname__ unless spawn was given one; settable while
    it lives), `done` tells whether its function returned or raised.  An exception it ended with is raised by
    join(); one nobody joined is reported through sys.unraisablehook when the
    Fiber is dropped.  It runs in its own contextvars context: a copy of its
    spawner's at spawn (a handler's fiber: of the context px.run was called in).
    """

    __slots__ = ("_f", "_run", "id", "_fn", "_args", "_ctx", "_done", "_result", "_exc",
                 "_joined", "_group", "_future", "_name", "__weakref__")

    def __init__(self, run: "_Run", fn: Callable[..., T], args: Tuple[Any, ...] = (),
                 ctx: Optional[contextvars.Context] = None) -> None:
        self._ctx: Optional[contextvars.Context] = (contextvars.copy_context() if ctx is None
                                                    else ctx)
        self._run = run
        self._fn: Union[Callable[..., T], str, None] = fn
        self._args: Optional[Tuple[Any, ...]] = args
        self._f: Any = None
        self.id = 0
        self._done = False
        self._result: Any = None
        self._exc: Optional[BaseException] = None
        self._joined = False
        self._group: Any = None                 # the px.group it is a member of
        self._future: Any = None                # its px.Future, once one was asked for
        # _name is set only for a name given (spawn's name=, the setter): else
        # the name is the function's, looked up when asked for -- and given
        # to C only when a dump or a deadlock report needs it (_dump.py,
        # name_by_default in _host.c): at every spawn it would cost ~8%.

    @property
    def name(self) -> Optional[str]:
        """Its name, as reports and dumps print it (`fiber 3 "fetch"`): its
        function's __qualname__ unless spawn(..., name=) gave another, or
        None for one without either (a functools.partial).  Never waits.

        Setting it renames the fiber (None: unnamed); reports keep the
        first 63 bytes of its UTF-8.  Raises NoFiberError for a fiber that
        has ended or that is not of the caller's run (another run's, or
        off-run), TypeError for what is not a str or None."""
        try:
            name: Optional[str] = self._name
            return name
        except AttributeError:
            pass
        fn = self._fn                           # once done: its __qualname__, or None
        name = fn if isinstance(fn, str) else getattr(fn, "__qualname__", None)
        return name if isinstance(name, str) else None

    @name.setter
    def name(self, name: Optional[str]) -> None:
        _check_name(name)
        if self._done or self._run is not _host.current() or not self.id:
            raise NoFiberError(f"cannot name fiber {self.id}: "
                               + ("it has ended" if self._done else "it is not of this run"))
        _set_name(self.id, name)
        self._name = name

    @property
    def number(self) -> int:
        """The number reports and dumps print for it: its count within its
        run, 1 for the run's first fiber (main).  Never waits; any thread."""
        return int(lib.px_fiber_number(self.id))

    @property
    def done(self) -> bool:
        """True once its function returned or raised."""
        return self._done

    def join(self) -> T:
        """Waits until the fiber ended; returns its result or raises its exception.

        May wait (not once it is done).  Raises Timeout / Cancelled from the
        scopes around it, DeadlockError for a fiber joining itself, BusyError
        from outside the fiber's run (another thread, or off-fiber).
        """
        if not self._done:
            if self._run is not _host.current():
                raise BusyError("join from outside the fiber's run")
            rc = _host.wait(_JOIN, self._f, 0)
            if rc != 0:
                _raise_wait(rc, "fiber join")
        self._joined = True
        if self._exc is not None:
            raise self._exc
        result: T = self._result
        return result

    def _main(self) -> None:
        # Its body, run by a worker greenlet of _host (which then goes on to
        # the next fiber, or runs the next new one itself).  The frame lets go
        # of self at the end: a kept exception's traceback holds this frame,
        # which would hold the Fiber in a cycle, and the Fiber (with an
        # unjoined exception) would be released only by the garbage collector.
        # It runs in self._ctx, which the worker entered (see run_job in
        # _host.c) and leaves after it.
        # A group's member reports its exception to the group instead; a
        # future asked for it is settled as it ends.
        fn, args = self._fn, self._args
        assert callable(fn) and args is not None
        self._ctx = None
        try:
            self._result = fn(*args)
        except BaseException as e:              # kept for join, or for run()
            self._exc = e
            if self._group is not None:
                self._group._member_failed(self, e)
            else:
                self._run.fiber_failed(self, e)
        finally:
            self._done = True
            self._fn = getattr(fn, "__qualname__", None)   # for repr, not fn
            self._args = None
            if self._future is not None:
                self._future._settle(self._result, self._exc)
            del self, fn, args

    def _future_of(self) -> Any:
        # Its px.Future (made at the first call: settled now if it ended);
        # from the fiber's run only, as join.
        fu = self._future
        if fu is None:
            from ._structured import Future
            fu = self._future = Future()
            if self._done:
                fu._settle(self._result, self._exc)
        return fu

    def __del__(self) -> None:
        try:
            exc = self._exc
        except AttributeError:                  # __init__ never ran: nothing to do
            return
        if exc is not None and not self._joined and self._run.reports(exc):
            self._exc = None
            _report(exc, self.id, self)
        f, self._f = self._f, None
        if f:
            run = self._run
            if run.alive and _host.current() is run:
                _host.release(f)

    def __repr__(self) -> str:
        # Once done, _fn holds the function's name only (see _main).
        fn = self._fn
        name = fn if isinstance(fn, str) else getattr(fn, "__qualname__", None)
        what = f" {name}" if name else ""
        if not self._done:
            state = "live"
        elif self._exc is not None:
            state = f"done, raised {type(self._exc).__name__}"
        else:
            state = "done"
        return f"<parataxis.Fiber {self.id}{what} {state}>"


def _check_name(name: object) -> None:
    if name is not None and not isinstance(name, str):
        raise TypeError(f"a name is a str or None, not {type(name).__name__}")


def _set_name(fid: int, name: Optional[str]) -> None:
    # px_fiber_set_name of fiber fid (0: the calling one) of this thread's run.
    rc = lib.px_fiber_set_name(fid, ffi.NULL if name is None
                               else name.encode("utf-8", "replace"))
    if rc == lib.PX_ENOFIBER:
        raise NoFiberError(f"fiber {fid} is no live fiber of this run")
    if rc != 0:
        raise_for(rc)


def _default_name(fn: Callable[..., Any]) -> Optional[str]:
    # A fiber's default name: its function's __qualname__, if a str (as
    # name_of in _host.c has it).
    name = getattr(fn, "__qualname__", None)
    return name if isinstance(name, str) else None


def _report(exc: BaseException, fid: int, obj: object) -> None:
    hook = getattr(sys, "unraisablehook", None)
    if hook is not None:
        try:
            hook(_Unraisable(exc, f"fiber {fid} ended with an exception nobody joined", obj))
        except Exception:
            pass


class _Unraisable:
    """What sys.unraisablehook receives (the attributes it reads)."""

    def __init__(self, exc: BaseException, message: str, obj: object) -> None:
        self.exc_type = type(exc)
        self.exc_value = exc
        self.exc_traceback = exc.__traceback__
        self.err_msg = message
        self.object = obj


class _Run:
    """One px.run on one thread: its scheduler, root greenlet and main fiber."""

    root: greenlet                      # set by run(), before the first fiber

    def __init__(self) -> None:
        self.alive = False
        self.main: Optional[Fiber[Any]] = None
        self.failure: Optional[BaseException] = None
        self.scheduler: Optional[Scheduler] = None
        self.thread = threading.get_ident()
        self.cancelled = False                  # the run cancelled every fiber
        self.virtual = False                    # on a virtual clock (run(clock=))
        # The context handler fibers copy: the one run() was called in.
        self.context = contextvars.copy_context()

    def cancel(self) -> None:
        self.cancelled = True
        _host.cancel()

    def fiber_failed(self, fiber: Optional[Fiber[Any]], exc: BaseException) -> None:
        # The main fiber's exception, or a KeyboardInterrupt / SystemExit in any
        # fiber, ends the program: every other fiber is cancelled and unwinds,
        # then run() raises it.  A run given up (run() is raising already)
        # unwinds its fibers with GreenletExit: nothing is left to cancel.
        if not self.alive:
            return
        if fiber is self.main or not isinstance(exc, Exception):
            if self.failure is None:
                self.failure = exc
            self.cancel()

    def reports(self, exc: BaseException) -> bool:
        # Not the run's own failure, nor the Cancelled its cancel caused.
        return (exc is not self.failure and isinstance(exc, Exception)
                and not (self.cancelled and isinstance(exc, Cancelled)))


def _factory(key: Optional[int], call: Any) -> "Fiber[Any]":
    # A fiber that an executor's call started: its Fiber, at its first turn.
    # Scheduler.post's call `key`, or a timer queue's call (a _host.Call, whose
    # run() makes it and then the Python handler it reaches, which may wait).
    run = _host.current()
    assert run is not None              # only a run's turns call it
    # It is the fiber whose turn it is (px_self).  Its name, as any fiber's
    # default one, is told to C when a dump or a report needs it: its
    # function's, or "timer handler" (Call.run says nothing).
    if key is not None:
        fn, args, ctx = _take_posted(key)
        fiber = Fiber(run, fn, args, ctx)
    else:
        fiber = Fiber(run, call.run, (), run.context.copy())
        fiber._name = "timer handler"
    fiber.id = lib.px_self()
    return fiber


# Scheduler.post's calls, by key, from the post until their fiber starts:
# fn, args and a copy of the poster's context.
_POSTED: Dict[int, Tuple[Callable[..., Any], Tuple[Any, ...], contextvars.Context]] = {}
_POSTED_LOCK = threading.Lock()
_next_key = iter(range(1, 1 << 62)).__next__


def _take_posted(key: int) -> Tuple[Callable[..., Any], Tuple[Any, ...], contextvars.Context]:
    with _POSTED_LOCK:
        return _POSTED.pop(key)


def _posted(key: int, status: int) -> None:
    # A post whose fiber could not be made, or that came after the run: dropped
    # (its call would run off-fiber, or in no run at all).
    with _POSTED_LOCK:
        _POSTED.pop(key, None)


_host.configure(_posted)


class Scheduler:
    """The scheduler of a running px.run, as an executor.

    TimerQueue(executor=px.scheduler()) runs each handler as a new fiber of
    the run, and post(fn, *args) starts fn(*args) as one, from any thread.
    Once the run is over, a timer queue's handlers are called aborted and
    post raises Closed.
    """

    def __init__(self, run: _Run) -> None:
        self._run = run
        self._exec = _host.executor()

    def post(self, fn: Callable[..., Any], *args: Any) -> None:
        """Starts fn(*args) as a new fiber of the run; returns None.

        Any thread; never waits.  Raises TypeError unless fn is callable,
        NoMemory, and Closed once the run is over (the call never runs)."""
        if not callable(fn):
            raise TypeError("post: fn must be callable")
        key = _next_key()
        with _POSTED_LOCK:
            _POSTED[key] = (fn, args, contextvars.copy_context())
        rc = _host.post(self._exec, key)
        if rc != 0:
            with _POSTED_LOCK:
                _POSTED.pop(key, None)
            if rc == lib.PX_ECLOSED:
                raise Closed("the run of this scheduler is over")
            raise_for(rc)

    def _hold(self) -> bool:
        # A timer queue delivering here owes a handler call (its add, in
        # _timers.c): the run must neither end nor report a deadlock before the
        # call's fiber starts; _unhold at its final call.  False (no hold)
        # once the run was cancelled or is over: the call is then aborted.
        return _host.hold(self._exec)

    def _unhold(self) -> None:
        _host.unhold(self._exec)

    def _executor(self) -> Any:
        # The px_executor * a TimerQueue copies: the buffer of self._exec, which
        # the TimerQueue keeps alive through this Scheduler.
        return ffi.from_buffer("px_executor *", self._exec)

    def __repr__(self) -> str:
        state = "running" if self._run.alive else "done"
        return f"<parataxis.Scheduler of thread {self._run.thread:#x} {state}>"


class VirtualClock:
    """A clock of the run's own, for tests of code that sleeps:
    px.run(main, clock=px.VirtualClock()).

    It stands still while any fiber can run, and when every fiber waits on
    time alone it jumps to the next deadline at once: an hour's sleep takes
    no real time.  While something from outside could still come -- a fiber
    waits on an fd or a socket, a run_blocking job runs, a timer queue
    (which keeps real time) owes the run a handler call -- the run waits in
    the kernel and the clock moves with real time meanwhile.  An open
    cancel_scope does not: a sleep inside it is jumped over all the same.  px.now() on the
    run's thread, sleep, timeout, move_on_after, select's deadlines and
    the dump all read it; other threads keep real time.  It starts at the
    real reading of px.now() when the run begins.  One VirtualClock may be
    given to any number of runs: each run has a clock of its own.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return "<parataxis.VirtualClock>"


def _clock_code(clock: Optional[VirtualClock]) -> int:
    if clock is None:
        return int(lib.PX_CLOCK_REAL)
    if isinstance(clock, VirtualClock):
        return int(lib.PX_CLOCK_VIRTUAL)
    raise TypeError(f"run: clock must be a px.VirtualClock or None, not {type(clock).__name__}")


def run(main: Callable[..., T], *args: Any, clock: Optional[VirtualClock] = None) -> T:
    """Runs main(*args) as the first fiber of a new scheduler on this thread,
    until every fiber ended; returns main's result or raises its exception.
    The main fiber is named after main's __qualname__, and is fiber 1.

    clock=px.VirtualClock() runs it on a virtual clock (see VirtualClock);
    None, the default, on the real one.  Anything else: TypeError.

    When main raises (or any fiber ends with KeyboardInterrupt or SystemExit),
    every other fiber is cancelled first: each wait raises Cancelled, their
    finally blocks run, and then run() raises it.  When fibers are left
    waiting with nothing that could wake them, they are cancelled the same way
    and run() raises DeadlockError, whose message is the engine's report.
    Raises BusyError inside a fiber (or while this thread runs another
    scheduler), TypeError unless main is callable.
    """
    if not callable(main):
        raise TypeError("run: main must be callable")
    code = _clock_code(clock)
    r = _Run()
    r.root = getcurrent()
    r.virtual = code == lib.PX_CLOCK_VIRTUAL
    _host.begin(r, r.root, _factory, code)
    r.alive = True
    deadlock: Optional[bool] = None
    names: Dict[int, str] = {}                  # unnamed fibers of a deadlock report
    try:
        fiber: Fiber[T] = Fiber(r, main, args)
        r.main = fiber
        fiber._f, fiber.id = _host.spawn(fiber)
        while True:
            rc = _host.loop()
            if rc == lib.PX_EDEADLK:            # unwind them all, then say why
                if deadlock is None:
                    deadlock = r.failure is None    # unless something failed first
                    if deadlock:                # the fibers the report names are parked
                        try:
                            names = _dump._unnamed()
                        except Exception:       # pragma: no cover - no memory: numbers only
                            names = {}
                r.cancel()
                continue
            if rc != 0:
                raise_for(rc)
            if _host.close_executor():
                break
    finally:
        r.alive = False
        signal_failure, report = _host.finish_run()
    if signal_failure is not None:              # Ctrl-C came first: the rest followed
        r.failure = signal_failure
    if deadlock:                                # what the unwinding raised follows
        raise DeadlockError(_dump._name_report(report, names) if report
                            else "deadlock") from r.failure
    if r.failure is not None:
        raise r.failure
    fiber._joined = True
    result: T = fiber._result
    return result


def spawn(fn: Callable[..., T], *args: Any, name: Optional[str] = None) -> Fiber[T]:
    """Starts fn(*args) as a new fiber of the running scheduler; returns its
    Fiber.  It first runs when the caller next waits, yields or ends.  Never
    waits.

    `name` names it in reports and dumps (`fiber 4 "poller"`); by default it
    is named after fn's __qualname__.  Raises NoFiberError outside run,
    TypeError unless fn is callable or for a name that is not a str."""
    r = _host.current()
    if r is None:
        raise NoFiberError("spawn outside px.run")
    if not callable(fn):
        raise TypeError("spawn: fn must be callable")
    fiber: Fiber[T] = Fiber(r, fn, args)
    if name is None:                # named after fn when a dump or report needs it
        fiber._f, fiber.id = _host.spawn(fiber)
    else:
        _check_name(name)
        fiber._name = name
        fiber._f, fiber.id = _host.spawn(fiber, name)
    return fiber


def current_fiber() -> Fiber[Any]:
    """The calling fiber's Fiber: px.current_fiber().name = "..." renames it.
    Never waits.  Raises NoFiberError off-fiber."""
    f: Optional[Fiber[Any]] = _host.current_fiber()
    if f is None:
        raise NoFiberError("current_fiber() off-fiber")
    return f


def sleep(seconds: float) -> None:
    """Suspends the calling fiber for `seconds` (never less); returns None.

    Waits.  Raises Timeout / Cancelled from the scopes, NoFiberError
    off-fiber, InvalidArgument for a negative or NaN duration, TypeError for
    a non-number.  One of 2**63 ns or more (math.inf, 10**400) is "never":
    only a scope ends it."""
    rc = _host.sleep(_ns(seconds, "sleep"))
    if rc != 0:
        _raise_wait(rc, "sleep")


yield_ = _host.yield_


def current_id() -> int:
    """The calling fiber's id, or 0 off-fiber.  Never waits."""
    return lib.px_self()


def scheduler() -> Scheduler:
    """The scheduler of the run this thread is in (the same object for the
    whole run).  Never waits.  Raises NoFiberError outside run."""
    r = _host.current()
    if r is None:
        raise NoFiberError("scheduler() outside px.run")
    if r.scheduler is None:
        r.scheduler = Scheduler(r)
    return r.scheduler


def _raise_wait(rc: int, what: str) -> None:
    if rc == _ETIMEDOUT:
        raise Timeout(f"{what}: timed out")
    if rc == _ECANCELED:
        raise Cancelled(f"{what}: cancelled")
    raise_for(rc)


# -- scopes -------------------------------------------------------------------

_S = TypeVar("_S", bound="_Scope")


class _Scope:
    """What the three scopes share: a push on entry, a pop on exit.

    The C scopes of a fiber are a stack, and a pop closes the innermost one of
    the calling fiber.  So _host keeps each fiber's innermost open scope, and
    each scope the one it is nested in: an exit that would pop another scope
    -- out of order, in another fiber, off-fiber -- is refused with
    RuntimeError before it touches anything, so every scope keeps its
    deadline and its `fired` flag."""

    __slots__ = ("_ns", "_token", "fired", "_open", "_outer")

    def __init__(self, ns: int = -1, token: Optional["CancellationToken"] = None) -> None:
        self._ns = ns
        self._token = token
        self.fired = False
        self._open = False
        self._outer: Optional[_Scope] = None

    def __enter__(self: _S) -> _S:
        """Opens the scope for the calling fiber; returns it.  Never waits.
        Raises NoFiberError off-fiber, RuntimeError when entered twice."""
        if self._open:
            raise RuntimeError("a scope is entered once")
        rc = self._push()
        if rc != 0:
            raise_for(rc)
        self._outer = _host.scope_push(self)
        self._open = True
        return self

    def _push(self) -> int:
        # The C push of the scope, for the calling fiber: 0 or a PX_E* code.
        if self._token is not None:
            return int(lib.px_scope_push_cancel(self._token._t))
        return int(lib.px_scope_push_timeout(self._ns))

    def _close(self) -> int:
        if not self._open:
            raise RuntimeError(f"{self!r} exited but not open")
        if not _host.scope_pop(self, self._outer):
            raise RuntimeError(self._misnested())
        self._outer = None
        self._open = False
        rc = lib.px_scope_pop()
        if rc < 0 and rc not in (_ETIMEDOUT, _ECANCELED):
            raise_for(rc)
        self.fired = rc != 0
        return rc

    def _misnested(self) -> str:
        inner = top = _host.scope_top()
        while top is not None and top is not self:
            top = top._outer
        if top is None:
            return (f"{self!r} exited in another fiber than the one that entered it "
                    f"(or off-fiber): it stays open there")
        return (f"scopes exited out of order: {self!r} before {inner!r}, entered inside it; "
                f"both stay open")

    def _state(self, fired: str = " fired") -> str:
        # For repr: open (inside its with block), and whether it fired.
        return (" open" if self._open else "") + (fired if self.fired else "")


class timeout(_Scope):
    """with px.timeout(seconds): every wait in the block that would end after
    the deadline raises px.Timeout (a TimeoutError) instead; `fired` says
    whether this scope's deadline was the one that passed.  InvalidArgument
    for a negative or NaN duration; one of 2**63 ns or more (math.inf) never
    passes.  Exited out of order or in another fiber: RuntimeError (see
    _Scope)."""

    __slots__ = ()

    def __init__(self, seconds: float) -> None:
        super().__init__(_ns(seconds, "timeout"))

    def __exit__(self, *exc: object) -> Literal[False]:
        self._close()
        return False

    def __repr__(self) -> str:
        return f"<parataxis.timeout {self._ns / 1e9}s{self._state()}>"


class move_on_after(_Scope):
    """with px.move_on_after(seconds) as scope: like timeout(), but the block
    just ends when its own deadline passed: the Timeout it raised is swallowed
    and scope.expired is True.  A Timeout of an outer scope goes on."""

    __slots__ = ()

    def __init__(self, seconds: float) -> None:
        super().__init__(_ns(seconds, "move_on_after"))

    @property
    def expired(self) -> bool:
        """True when this scope's own deadline passed (its Timeout was swallowed)."""
        return self.fired

    def __exit__(self, typ: Any, value: Any, tb: Any) -> bool:
        rc = self._close()
        return rc == _ETIMEDOUT and typ is not None and issubclass(typ, Timeout)

    def __repr__(self) -> str:
        return f"<parataxis.move_on_after {self._ns / 1e9}s{self._state(' expired')}>"


class CancellationToken:
    """A flag any thread may raise with cancel(); waits inside a cancel_scope
    of it then raise px.Cancelled."""

    __slots__ = ("_t", "_own")

    def __init__(self) -> None:
        # The C token is _own's, freed when this object is deallocated: after
        # every finalizer of a reference cycle it is in, which may still use it
        # (an ffi.gc destructor is a finalizer the collector may run first).
        try:
            self._own = _host.Token()
        except MemoryError:
            raise MemoryError("px_token_new") from None
        self._t = ffi.from_buffer("px_token *", self._own)

    def cancel(self) -> bool:
        """Cancels it: True, or False if it was cancelled already.  Any
        thread; never waits.  The waits it interrupts raise Cancelled."""
        rc = lib.px_token_cancel(self._t)
        if rc < 0:
            raise_for(rc)
        return rc == 1

    @property
    def cancelled(self) -> bool:
        """True once cancel() was called (any thread)."""
        return bool(lib.px_token_cancelled(self._t))

    def __repr__(self) -> str:
        return f"<parataxis.CancellationToken{' cancelled' if self.cancelled else ''}>"


class cancel_scope(_Scope):
    """with px.cancel_scope(token): every wait in the block raises px.Cancelled
    once the token is cancelled (at once if it was); `fired` says whether this
    scope's token was the one."""

    __slots__ = ()

    def __init__(self, token: CancellationToken) -> None:
        if not isinstance(token, CancellationToken):
            raise TypeError("cancel_scope takes a CancellationToken")
        super().__init__(token=token)

    def __exit__(self, *exc: object) -> Literal[False]:
        self._close()
        return False

    def __repr__(self) -> str:
        return f"<parataxis.cancel_scope{self._state()} of {self._token!r}>"
