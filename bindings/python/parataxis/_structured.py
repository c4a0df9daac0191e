"""Structured concurrency: futures (Future, wait_all, wait_any), task groups
(group) and map, each a thin shell over its C counterpart.

Python values stay on the Python side: a C px_future carries only the
settlement (a result, or a failure status), the Future keeps the value or the
exception; a C px_group owns the member fibers and cancels them through its
own scope, the Group keeps the members' exceptions.  See docs/python.md,
"Structured concurrency", for the rules and why they are these.
"""
from __future__ import annotations

import itertools
import sys
import threading
from typing import (Any, Callable, Generic, Iterable, List, Optional, Sequence, Type, TypeVar,
                    Union)

from greenlet import GreenletExit

from . import _host
from ._errors import (BusyError, Cancelled, Closed, DeadlockError, InvalidArgument,
                      NoFiberError, NoMemory, Timeout, raise_for)
from ._fibers import (CancellationToken, Fiber, _check_name, _default_name, _raise_wait,
                      _Scope)
from ._parataxis import ffi, lib

if sys.version_info >= (3, 11):
    from builtins import BaseExceptionGroup
else:                                           # pragma: no cover - the backport
    from exceptiongroup import BaseExceptionGroup

T = TypeVar("T")
R = TypeVar("R")

_ETIMEDOUT = lib.PX_ETIMEDOUT
_ECANCELED = lib.PX_ECANCELED
_ECLOSED = lib.PX_ECLOSED
_FAILED = 1                 # the C status of a Python exception: no PX_E* code is > 0
_FUTURE_WAIT = _host.FUTURE_WAIT
_GROUP_WAIT = _host.GROUP_WAIT
_wait = _host.wait
_wait_futures = _host.wait_futures
_order = itertools.count(1).__next__    # settlements, in the order they came


def _prim(kind: int, what: str) -> Any:
    try:
        return _host.Prim(kind)
    except MemoryError:
        raise NoMemory(f"{what}: out of memory") from None


# -- futures ------------------------------------------------------------------

class Future(Generic[T]):
    """A value set once that any number of fibers wait for, of any run.

    set_result(v) or set_exception(e) settles it, from any thread (a fiber,
    a plain thread, a timer's handler); a second settlement raises
    BusyError and changes nothing.  result() waits until it is settled and
    returns the value or raises the exception -- every waiter gets it.
    """

    __slots__ = ("_h", "_p", "_lock", "_result", "_exc", "_order", "__weakref__")

    def __init__(self) -> None:
        self._h = _prim(_host.K_FUTURE, "Future")
        self._p = ffi.from_buffer("px_future *", self._h)
        self._lock = threading.Lock()
        self._result: Any = None
        self._exc: Optional[BaseException] = None
        self._order = 0                 # > 0 once settled: the settlement's rank

    def set_result(self, value: T) -> None:
        """Settles it with value and wakes every waiter.  Any thread; never
        waits.  BusyError when it was settled already."""
        self._set(value, None)

    def set_exception(self, exc: Union[BaseException, Type[BaseException]]) -> None:
        """Settles it with exc (an exception, or a class to instantiate):
        result() raises it in every waiter.  Any thread; never waits.
        BusyError when it was settled already, TypeError for what is no
        exception."""
        if isinstance(exc, type) and issubclass(exc, BaseException):
            exc = exc()
        if not isinstance(exc, BaseException):
            raise TypeError(f"set_exception: an exception, not {type(exc).__name__}")
        self._set(None, exc)

    def _set(self, value: Any, exc: Optional[BaseException]) -> None:
        if not self._settle(value, exc):
            raise BusyError("the future is settled already")

    def _settle(self, value: Any, exc: Optional[BaseException]) -> bool:
        # The Python side first, then the C settlement that wakes the waiters:
        # a waiter that sees it settled (C, or _order) finds the value there.
        with self._lock:
            if self._order:
                return False
            self._result, self._exc = value, exc
            self._order = _order()
            rc = (lib.px_future_set_error(self._p, _FAILED) if exc is not None
                  else lib.px_future_set_result(self._p, ffi.NULL))
        if rc != 0:
            raise_for(rc)
        return True

    def done(self) -> bool:
        """True once it is settled.  Any thread; never waits."""
        return self._order != 0

    def result(self) -> T:
        """Waits until it is settled; returns its value or raises its
        exception.

        May wait (not once settled).  Raises Timeout / Cancelled from the
        scopes (it stays unsettled for the others), NoFiberError off-fiber
        while it is unsettled (a settled one answers anywhere)."""
        self._wait("future wait")
        if self._exc is not None:
            raise self._exc
        value: T = self._result
        return value

    def exception(self) -> Optional[BaseException]:
        """Waits as result() does; returns the exception it was settled
        with, or None for a value."""
        self._wait("future wait")
        return self._exc

    def _wait(self, what: str) -> None:
        if not self._order:
            rc = _wait(_FUTURE_WAIT, self._h)
            if rc < 0:
                _raise_wait(rc, what)

    def __del__(self) -> None:
        # The C future goes when the Prim is deallocated (after the other
        # finalizers of a cycle this is in): px_future_free, any thread; one a
        # fiber still waits on (a run torn down mid-wait) is kept for the sweep.
        h = getattr(self, "_h", None)
        if h is not None:
            h.collect()

    def __repr__(self) -> str:
        if not self._order:
            state = "pending"
        elif self._exc is not None:
            state = f"raised {type(self._exc).__name__}"
        else:
            state = "done"
        return f"<parataxis.Future {state}>"


FutureLike = Union[Future[Any], Fiber[Any]]


def _futures(items: Iterable[FutureLike], what: str) -> List[Future[Any]]:
    out: List[Future[Any]] = []
    for x in items:
        if isinstance(x, Future):
            out.append(x)
        elif isinstance(x, Fiber):
            if x._run is not _host.current():
                raise BusyError(f"{what}: a fiber is waited for from its own run only")
            if not x._done and x.id == lib.px_self():
                raise DeadlockError(f"{what}: a fiber waits for its own end")
            out.append(x._future_of())
        else:
            raise TypeError(f"{what}: a px.Future or a px.Fiber, not {type(x).__name__}")
    return out


def _raise_of(items: Sequence[FutureLike], fus: List[Future[Any]], fu: Future[Any]) -> None:
    # Raises fu's exception; a fiber's counts as joined.
    for x, f in zip(items, fus):
        if f is fu and isinstance(x, Fiber):
            x._joined = True
    assert fu._exc is not None
    raise fu._exc


def wait_all(futures: Iterable[FutureLike]) -> List[Any]:
    """Waits until every one of `futures` (px.Future or px.Fiber) is
    settled; returns their results in the input order.  As soon as one
    fails, raises its exception (the first to fail) without waiting for the
    rest.

    May wait.  Raises Timeout / Cancelled from the scopes, NoFiberError
    off-fiber while one is unsettled, TypeError for what is neither,
    BusyError for a Fiber of another run, DeadlockError for the calling
    fiber's own."""
    items = list(futures)
    fus = _futures(items, "wait_all")
    if fus and not all(f._order for f in fus):
        rc = _wait_futures([f._h for f in fus], False)
        if rc < 0:
            _raise_wait(rc, "wait_all")
    failed = [f for f in fus if f._exc is not None]
    if failed:
        _raise_of(items, fus, min(failed, key=lambda f: f._order))
    return [f._result for f in fus]


def wait_any(futures: Iterable[FutureLike]) -> int:
    """Waits until one of `futures` (px.Future or px.Fiber) is settled;
    returns its index (the first settled, with a value or an exception;
    futures[i].result() or .join() gives what it settled with).

    May wait.  Raises InvalidArgument for no futures, Timeout / Cancelled
    from the scopes, NoFiberError off-fiber while none is settled, TypeError
    for what is neither, BusyError for a Fiber of another run, DeadlockError
    for the calling fiber's own."""
    items = list(futures)
    fus = _futures(items, "wait_any")
    if not fus:
        raise InvalidArgument("wait_any: no futures")
    rc = _wait_futures([f._h for f in fus], True)
    if rc < 0:
        _raise_wait(rc, "wait_any")
    return rc


# -- groups -------------------------------------------------------------------

class _group_scope(_Scope):
    """The with block's scope: the group's own cancel scope in C
    (px_group_scope_push), so the block is cancelled with the members, and,
    like theirs, it does not keep px.run from reporting a deadlock as a
    token's scope would."""

    __slots__ = ("_g",)

    def __init__(self, g: Any) -> None:
        super().__init__()
        self._g = g

    def _push(self) -> int:
        return int(lib.px_group_scope_push(self._g))

    def __exit__(self, *exc: object) -> bool:
        self._close()
        return False


_NEW, _OPEN, _CLOSING, _CLOSED = range(4)
# Raised bare, as asyncio.TaskGroup raises them; GreenletExit too: a run given
# up unwinds its fibers with it, and a group in one must let it through.
_PASS_THROUGH = (KeyboardInterrupt, SystemExit, GreenletExit)


class Group:
    """A task group (a nursery): `with px.group() as g: g.spawn(fn, *args)`.

    Leaving the with block waits for every member.  The first failure --
    a member's exception, or the block's -- cancels the group: every wait of
    every member and of the block raises Cancelled, and the block exits.
    Then the with statement raises ExceptionGroup of every failure, in the
    order they came (a member that raised Cancelled because the group was
    cancelled has not failed).  KeyboardInterrupt and SystemExit pass through
    bare, as asyncio.TaskGroup does.  g.cancel() cancels it from any thread.
    See docs/python.md, "Structured concurrency", for the rules.
    """

    __slots__ = ("_h", "_p", "_run", "_token", "_scope", "_failures", "_base", "_state",
                 "__weakref__")

    def __init__(self) -> None:
        self._h: Any = None
        self._p: Any = None
        self._run: Any = None
        self._token = CancellationToken()
        self._scope: Optional[_group_scope] = None
        self._failures: List[BaseException] = []
        self._base: Optional[BaseException] = None   # a KeyboardInterrupt, a SystemExit
        self._state = _NEW

    def __enter__(self) -> "Group":
        """Opens the group in the calling fiber; the block runs in its cancel
        scope.  NoFiberError off-fiber, RuntimeError when entered twice."""
        if self._state != _NEW:
            raise RuntimeError("a group is entered once")
        r = _host.current()
        if r is None or lib.px_self() == 0:
            raise NoFiberError("px.group outside a fiber")
        self._h = _prim(_host.K_GROUP, "group")
        self._p = ffi.from_buffer("px_group *", self._h)
        self._run = r
        self._scope = _group_scope(self._p)
        self._scope.__enter__()
        self._state = _OPEN
        return self

    def spawn(self, fn: Callable[..., R], *args: Any, name: Optional[str] = None) -> Fiber[R]:
        """Starts fn(*args) as a member; returns its Fiber (join() waits for
        it, as for any fiber).  It first runs when the caller next waits.
        Never waits.  Any fiber of the run may spawn into an open group: the
        block, a member (into its own group too), while the block's exit waits.
        `name` names it as px.spawn's does (default: fn's __qualname__).

        Raises Cancelled (nothing spawned) once the group is cancelled,
        Closed once its with block ended, RuntimeError before it,
        TypeError unless fn is callable or for a name that is not a str,
        NoFiberError off-fiber, WrongSchedulerError from another run."""
        if not callable(fn):
            raise TypeError("spawn: fn must be callable")
        _check_name(name)
        if self._state == _NEW:
            raise RuntimeError("spawn into a group before its with block")
        r = _host.current()
        if r is None:
            raise NoFiberError("spawn outside px.run")
        if self._state == _CLOSED:
            raise Closed("the group is closed: its with block ended")
        fiber: Fiber[R] = Fiber(r, fn, args)
        fiber._group = self
        if name is None:                # named after fn when a dump or report needs it
            rc, fiber._f, fiber.id = _host.group_spawn(self._h, fiber)
        else:
            fiber._name = name
            rc, fiber._f, fiber.id = _host.group_spawn(self._h, fiber, name)
        if rc != 0:
            fiber._done = True                  # never started: nothing to report
            fiber._fn = fiber._args = None
            if rc == _ECANCELED:
                raise Cancelled("the group is cancelled: nothing was spawned")
            if rc == _ECLOSED:
                raise Closed("the group is closed: its with block ended")
            raise_for(rc)
        return fiber

    def cancel(self) -> bool:
        """Cancels the group: the waits of its members and of its block raise
        Cancelled, spawns are refused.  True when this call cancelled it,
        False if it was already.  Any thread; never waits.  RuntimeError
        before the with block."""
        if self._p is None:
            raise RuntimeError("cancel of a group before its with block")
        # The flag first: from another thread, the C cancel can end the
        # members and the block (cffi lets go of the GIL) before this thread
        # runs again, and `cancelled` must say so by then.
        self._token.cancel()
        rc = lib.px_group_cancel(self._p)
        if rc < 0:
            raise_for(rc)
        return rc == 1

    @property
    def cancelled(self) -> bool:
        """True once the group was cancelled (a failure, cancel())."""
        return self._token.cancelled

    @property
    def live(self) -> int:
        """How many members have not ended yet."""
        return 0 if self._p is None else int(lib.px_group_live(self._p))

    def _member_failed(self, fiber: Fiber[Any], exc: BaseException) -> None:
        # In the member, as it ends with exc: the group keeps it (nobody needs
        # to join the member for it).  A Cancelled once the group (or the
        # whole run) was cancelled is no failure.
        fiber._joined = True
        if not self._run.alive:             # a run given up: it unwinds, nothing to report
            return
        if isinstance(exc, Cancelled) and (self._token.cancelled or self._run.cancelled):
            return
        status = _ECANCELED if isinstance(exc, Cancelled) else _FAILED
        if lib.px_group_fail(self._p, status) != 1:
            return                          # a Cancelled after a cancel of C's
        if isinstance(exc, _PASS_THROUGH):
            if self._base is None:
                self._base = exc
        else:
            self._failures.append(exc)
        self._token.cancel()

    def _cancel_now(self) -> None:
        lib.px_group_cancel(self._p)
        self._token.cancel()

    def __exit__(self, typ: Any, exc: Optional[BaseException], tb: Any) -> bool:
        """Waits for every member (shielded: a scope of the caller that fires
        cancels the group, then the wait goes on); raises as the class says."""
        if self._state != _OPEN:
            raise RuntimeError("a group's with block exited but not open")
        assert self._scope is not None
        # Misnested (another fiber, scopes exited out of order): RuntimeError,
        # and the group stays open, as its scope does.
        self._scope.__exit__(typ, exc, tb)
        self._state = _CLOSING
        mine = False                        # exc is the group's own Cancelled
        outer = False                       # exc is a scope's of the caller: it goes on
        if exc is not None:
            if isinstance(exc, Cancelled) and self._token.cancelled:
                mine = True
            else:
                self._cancel_now()
                if isinstance(exc, _PASS_THROUGH):
                    if self._base is None:
                        self._base = exc
                elif isinstance(exc, (Timeout, Cancelled)):
                    outer = True
                else:
                    self._failures.append(exc)
        try:
            # A run given up (its fibers unwound by GreenletExit) has no turns
            # to wait with: its members are being discarded with it.
            rc = _wait(_GROUP_WAIT, self._h) if self._run.alive else 0
        finally:
            self._state = _CLOSED
            self._token._own.unscoped()     # its one scope, the block's, is closed
        if rc in (_ETIMEDOUT, _ECANCELED):  # a scope of the caller cancelled it (C)
            self._token.cancel()
        if self._base is not None:
            if self._base is exc:
                return False
            raise self._base
        if self._failures:
            raise BaseExceptionGroup(f"{len(self._failures)} failure(s) in a px.group",
                                     self._failures) from None
        if outer:
            return False
        if rc in (_ETIMEDOUT, _ECANCELED):
            _raise_wait(rc, "group wait")
        if rc < 0:
            raise_for(rc)
        return mine

    def __del__(self) -> None:
        h = getattr(self, "_h", None)
        run = getattr(self, "_run", None)
        if h is not None and (run is None or not run.alive or _host.current() is run):
            h.collect()

    def __repr__(self) -> str:
        state = ("new", "open", "closing", "closed")[self._state]
        more = " cancelled" if self.cancelled else ""
        return f"<parataxis.Group {state}{more}, {self.live} live, {len(self._failures)} failed>"


def group() -> Group:
    """A task group: `with px.group() as g: g.spawn(fn, *args)` (see Group)."""
    return Group()


# -- map ----------------------------------------------------------------------

def map(fn: Callable[[T], R], items: Iterable[T], concurrency: Optional[int] = None) -> List[R]:
    """Calls fn(item) for every item, each in a fiber of a group, at most
    `concurrency` at once (None: all at once); returns the results in the
    input order, whatever order the calls end in.

    The first call that raises cancels the calls still running (their waits
    raise Cancelled) and starts no more; map then raises that first
    exception itself (the builtin map's and Executor.map's way), once every
    call ended.  May wait.  Raises TypeError unless fn is callable, items
    iterable, concurrency an int or None; InvalidArgument for a concurrency
    below 1; NoFiberError off-fiber (not for no items: [] at once)."""
    if not callable(fn):
        raise TypeError("map: fn must be callable")
    if concurrency is not None:
        if isinstance(concurrency, bool) or not isinstance(concurrency, int):
            raise TypeError(f"map: concurrency must be an int or None, "
                            f"not {type(concurrency).__name__}")
        if concurrency < 1:
            raise InvalidArgument(f"map: concurrency must be >= 1, got {concurrency}")
    values = list(items)
    n = len(values)
    if n == 0:
        return []
    results: List[Any] = [None] * n
    indexes = iter(range(n))            # shared by the workers: each takes the next

    def worker(g: Group) -> None:
        for i in indexes:
            if g.cancelled:
                return
            results[i] = fn(values[i])

    # The workers' name in dumps and reports (a fiber's default name is its
    # function's __qualname__, looked up only when one is made).
    worker.__qualname__ = f"map({_default_name(fn)})"
    try:
        with group() as g:
            for _ in range(n if concurrency is None else min(concurrency, n)):
                g.spawn(worker, g)
    except BaseExceptionGroup as eg:
        raise eg.exceptions[0] from None
    return results
