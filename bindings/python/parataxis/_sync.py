"""The synchronization family for fibers: Mutex, RwLock, WaitGroup, Barrier,
Once, Semaphore, Event and Channel, each a thin shell over its C primitive.

The rules common to all of them are the C ones:

- Waits are FIFO and a release hands over directly: the next waiter owns what
  it waited for before it runs, so nobody barges in.
- Every wait is bounded by the scopes around it (px.timeout, move_on_after,
  cancel_scope) and raises Timeout or Cancelled; then nothing of the wait is
  left queued and nothing was acquired.
- Holders are fibers: a fiber that ends holding a Mutex, an RwLock hold or a
  running Once releases it as it ends (the next locker gets OwnerDiedError).
- One scheduler at a time (C's rule, PX_ETHREAD): while fibers of one run
  wait on an object or hold it, a call from another run (or another thread)
  that would wait beside them, take a hold beside them or hand something
  over to them raises WrongSchedulerError and changes nothing.  An object
  nobody waits on or holds may be used from any run.  NoFiberError outside
  any run (WaitGroup add/done excepted).
- The engine names every wait ("Mutex lock", ...): deadlock reports and
  traces show who waits on whom.
"""
from __future__ import annotations

import itertools
import math
from typing import (Any, Callable, Dict, Generic, Iterator, List, Optional, Tuple, TypeVar,
                    overload)

from . import _host
from ._errors import (Closed, ClosedResourceError, InvalidArgument, NoFiberError, NoMemory,
                      raise_for)
from ._fibers import _check_name, _raise_wait
from ._net import _fd
from ._parataxis import ffi, lib

T = TypeVar("T")

_EBUSY = lib.PX_EBUSY
_ECLOSED = lib.PX_ECLOSED


# The calls that may park go through _host.wait, named by op (see _handles.c).
# So does Mutex.unlock, which never parks but is on the hot path: a plain C call
# there rather than cffi, which costs ~250 ns a call here (it releases the GIL).
_wait = _host.wait
_MUTEX_LOCK = _host.MUTEX_LOCK
_MUTEX_UNLOCK = _host.MUTEX_UNLOCK
_RDLOCK = _host.RDLOCK
_WRLOCK = _host.WRLOCK
_WG_WAIT = _host.WG_WAIT
_ARRIVE = _host.ARRIVE
_ONCE_BEGIN = _host.ONCE_BEGIN
_ACQUIRE = _host.SEM_ACQUIRE
_EV_WAIT = _host.EVENT_WAIT
_SEND = _host.CHAN_SEND
_RECV = _host.CHAN_RECV


class _Primitive:
    """The C object: `_h` (a _host.Prim, which made it) and `_p`, cffi's typed
    view of it for the calls that never park; the run it belongs to; and its
    name, for reports and dumps (`mutex "accounts"@0x...`)."""

    __slots__ = ("_p", "_h", "_run", "_name", "__weakref__")
    _what = "primitive"

    def _own(self, kind: int, n: int, ctype: str, name: Optional[str] = None) -> None:
        _check_name(name)
        try:
            self._h = _host.Prim(kind, n)
        except MemoryError:
            raise NoMemory(f"{type(self).__name__}: out of memory") from None
        self._p = ffi.from_buffer(ctype, self._h)
        self._run: Any = None
        self._name: Optional[str] = None
        if name is not None:
            self.name = name

    @property
    def name(self) -> Optional[str]:
        """Its name (name= at construction, None for none), which deadlock
        reports and dumps print with its kind and address, as in
        `mutex "accounts"@0x...`.  Setting it renames it (None: unnamed); they
        keep the first 63 bytes of its UTF-8.  Any thread; never waits.
        TypeError for what is not a str or None."""
        return self._name

    @name.setter
    def name(self, name: Optional[str]) -> None:
        _check_name(name)
        rc = lib.px_object_set_name(self._p, ffi.NULL if name is None
                                    else name.encode("utf-8", "replace"))
        if rc != 0:
            raise_for(rc)
        self._name = name

    def _bind(self) -> None:
        """Checks that the caller is a fiber, and keeps the run that uses the
        object (the first one still alive: its thread frees it).  Whether
        another run may make the call is C's to say (PX_ETHREAD)."""
        r = _host.current()
        if r is self._run and r is not None:
            return
        if r is None:               # also for an object no run has used yet
            raise NoFiberError(f"{self._what} outside px.run")
        if self._run is None or not self._run.alive:
            self._run = r

    def _bind_off_fiber(self) -> None:
        """Like _bind, but a call outside any run is allowed (C refuses it
        with PX_ETHREAD while fibers of a run on another thread wait)."""
        r = _host.current()
        if r is not None and r is not self._run:
            self._bind()

    def _check(self, rc: int) -> int:
        if rc < 0:
            _raise_wait(rc, self._what)
        return rc

    def __del__(self) -> None:
        # Collected by the thread of its run (or with no run): C objects are
        # not thread-safe.  The C object goes when _h is deallocated, after the
        # other finalizers of a cycle this is in ran (they may still use it).
        # One still in use (PX_EBUSY) is kept, and freed when
        # a run of this thread ends (see _handles.c); one that fibers of
        # another thread's run still use is left allocated, never torn down.
        h = getattr(self, "_h", None)
        if h is None:
            return
        run = self._run
        if run is None or not run.alive or _host.current() is run:
            h.collect()


class Mutex(_Primitive):
    """A lock owned by a fiber, not reentrant.

    with m: locks and unlocks.  If the previous owner ended holding it, lock()
    raises OwnerDiedError with the lock held by the caller (repair, then
    unlock); `with m:` instead unlocks it again and raises OwnerDiedError
    before the block runs, so no lock is ever stranded by a with statement.
    """

    __slots__ = ()
    _what = "Mutex"

    def __init__(self, *, name: Optional[str] = None) -> None:
        self._own(_host.K_MUTEX, 0, "px_mutex *", name)

    def lock(self) -> None:
        """Waits until the caller owns it (FIFO); returns None.

        May wait.  Raises OwnerDiedError when the previous owner ended holding
        it (the caller owns it then), DeadlockError when the caller owns it
        already, Timeout / Cancelled from the scopes (not acquired then).
        """
        self._bind()
        rc = _wait(_MUTEX_LOCK, self._h)
        if rc:
            self._check(rc)

    def try_lock(self) -> bool:
        """Takes it if free: True; False when it is held or waited for.

        Never waits.  Raises OwnerDiedError as lock() does (acquired)."""
        self._bind()
        rc = lib.px_mutex_trylock(self._p)
        if rc == _EBUSY:
            return False
        self._check(rc)
        return True

    def unlock(self) -> None:
        """Hands it to the first waiter, or frees it; returns None.

        Never waits.  Raises NotOwnerError unless the caller owns it."""
        self._bind()
        rc = _wait(_MUTEX_UNLOCK, self._h)
        if rc:
            self._check(rc)

    @property
    def owner(self) -> Optional[int]:
        """The owner's fiber id, or None when free (never waits, any fiber)."""
        return lib.px_mutex_owner(self._p) or None

    @property
    def waiters(self) -> int:
        """How many fibers wait in lock()."""
        return lib.px_mutex_waiters(self._p)

    def __enter__(self) -> "Mutex":
        """lock(), but on OwnerDiedError unlocks before raising it, so that
        the block does not run and the lock is not stranded.  May wait."""
        self._bind()
        rc = _wait(_MUTEX_LOCK, self._h)
        if rc:
            if rc == lib.PX_EOWNERDEAD:
                lib.px_mutex_unlock(self._p)
            self._check(rc)
        return self

    def __exit__(self, *exc: object) -> None:
        """unlock() (NotOwnerError if the block unlocked it already)."""
        self.unlock()

    def __repr__(self) -> str:
        owner = self.owner
        state = f"owned by {owner}" if owner else "free"
        return f"<parataxis.Mutex {state}, {self.waiters} waiting>"


class _Hold:
    """The context manager of RwLock.read() / write()."""

    __slots__ = ("_lock", "_write")

    def __init__(self, lock: "RwLock", write: bool) -> None:
        self._lock, self._write = lock, write

    def __enter__(self) -> "RwLock":
        # As Mutex's with: on owner death the hold was taken, but __exit__
        # will not run, so it is given back before OwnerDiedError goes on.
        lk = self._lock
        lk._bind()
        rc = _wait(_WRLOCK if self._write else _RDLOCK, lk._h)
        if rc:
            if rc == lib.PX_EOWNERDEAD:
                (lib.px_rwlock_wrunlock if self._write else lib.px_rwlock_rdunlock)(lk._p)
            lk._check(rc)
        return lk

    def __exit__(self, *exc: object) -> None:
        if self._write:
            self._lock.wrunlock()
        else:
            self._lock.rdunlock()

    def __repr__(self) -> str:
        return f"<parataxis.RwLock.{'write' if self._write else 'read'}() of {self._lock!r}>"


class RwLock(_Primitive):
    """Many readers or one writer, writer-preferring: once a writer waits, new
    readers queue behind it.  A reader asking for the write lock (an upgrade)
    raises DeadlockError at once.  with l.read(): / with l.write(): hold it.

    After a writer ended holding it, wrlock() and rdlock() raise
    OwnerDiedError with the hold taken (release it); `with l.write():` and
    `with l.read():` give the hold back and raise before the block runs."""

    __slots__ = ()
    _what = "RwLock"

    def __init__(self, *, name: Optional[str] = None) -> None:
        self._own(_host.K_RWLOCK, 0, "px_rwlock *", name)

    def read(self) -> _Hold:
        """A context manager: rdlock() on entry, rdunlock() on exit."""
        return _Hold(self, False)

    def write(self) -> _Hold:
        """A context manager: wrlock() on entry, wrunlock() on exit."""
        return _Hold(self, True)

    def rdlock(self) -> None:
        """Waits until the caller holds a read hold (one more if it has
        some: reentrant); returns None.

        May wait (while a writer holds it or waits).  Raises OwnerDiedError
        when a writer ended holding it (the hold is taken), Timeout /
        Cancelled from the scopes (not taken)."""
        self._bind()
        rc = _wait(_RDLOCK, self._h)
        if rc:
            self._check(rc)

    def wrlock(self) -> None:
        """Waits until the caller holds the write lock; returns None.

        May wait.  Raises DeadlockError at once when the caller holds it
        already or holds read holds (an upgrade), OwnerDiedError when a
        writer ended holding it (acquired),
        Timeout / Cancelled from the scopes (not acquired)."""
        self._bind()
        rc = _wait(_WRLOCK, self._h)
        if rc:
            self._check(rc)

    def try_rdlock(self) -> bool:
        """A read lock if it can be had now: True; else False.  Never waits."""
        self._bind()
        rc = lib.px_rwlock_tryrdlock(self._p)
        if rc == _EBUSY:
            return False
        self._check(rc)
        return True

    def try_wrlock(self) -> bool:
        """The write lock if it is free now: True; else False.  Never waits."""
        self._bind()
        rc = lib.px_rwlock_trywrlock(self._p)
        if rc == _EBUSY:
            return False
        self._check(rc)
        return True

    def rdunlock(self) -> None:
        """Releases one read hold of the caller.  Never waits; NotOwnerError
        unless the caller holds one."""
        self._bind()
        self._check(lib.px_rwlock_rdunlock(self._p))

    def wrunlock(self) -> None:
        """Releases the write lock.  Never waits; NotOwnerError unless the
        caller is the writer."""
        self._bind()
        self._check(lib.px_rwlock_wrunlock(self._p))

    @property
    def readers(self) -> int:
        """How many fibers hold a read lock."""
        return lib.px_rwlock_readers(self._p)

    @property
    def writer(self) -> Optional[int]:
        """The writer's fiber id, or None."""
        return lib.px_rwlock_writer(self._p) or None

    @property
    def waiters(self) -> int:
        """How many fibers wait for it (readers and writers)."""
        return lib.px_rwlock_waiters(self._p)

    def __repr__(self) -> str:
        w = self.writer
        state = f"written by {w}" if w else f"{self.readers} readers"
        return f"<parataxis.RwLock {state}, {self.waiters} waiting>"


class WaitGroup(_Primitive):
    """A count of work in progress: add(n) before starting it, done() as each
    ends, wait() until the count is zero.  add and done need no fiber."""

    __slots__ = ()
    _what = "WaitGroup"

    def __init__(self, *, name: Optional[str] = None) -> None:
        self._own(_host.K_WAITGROUP, 0, "px_waitgroup *", name)

    def add(self, n: int = 1) -> None:
        """Adds n (may be negative) to the count; at zero, wakes the waiters.

        Never waits; needs no fiber.  Raises InvalidArgument if the count would
        go below zero."""
        self._bind_off_fiber()
        self._check(lib.px_waitgroup_add(self._p, n))

    def done(self) -> None:
        """add(-1).  Never waits; needs no fiber."""
        self._bind_off_fiber()
        self._check(lib.px_waitgroup_done(self._p))

    def wait(self) -> None:
        """Waits until the count is zero (returns at once if it is).

        May wait.  Raises Timeout / Cancelled from the scopes."""
        self._bind()
        rc = _wait(_WG_WAIT, self._h)
        if rc:
            self._check(rc)

    @property
    def count(self) -> int:
        """The count now."""
        return lib.px_waitgroup_count(self._p)

    def __repr__(self) -> str:
        return f"<parataxis.WaitGroup count={self.count}>"


class Barrier(_Primitive):
    """`parties` fibers meet: each arrive_and_wait() returns once all arrived,
    True for one of them (the leader) per phase; then the barrier re-arms."""

    __slots__ = ()
    _what = "Barrier"

    def __init__(self, parties: int, *, name: Optional[str] = None) -> None:
        if isinstance(parties, bool) or not isinstance(parties, int):
            raise TypeError("Barrier(parties): an int")
        if parties < 1:
            raise ValueError("Barrier(parties): parties >= 1")
        self._own(_host.K_BARRIER, parties, "px_barrier *", name)

    def arrive_and_wait(self) -> bool:
        """Waits until `parties` fibers arrived; True for the phase's leader,
        False for the others.

        May wait.  Raises Timeout / Cancelled from the scopes (the caller's
        arrival is withdrawn)."""
        self._bind()
        return self._check(_wait(_ARRIVE, self._h)) == 1

    @property
    def phase(self) -> int:
        """How many phases have completed."""
        return lib.px_barrier_phase(self._p)

    @property
    def waiting(self) -> int:
        """How many fibers arrived in the current phase."""
        return lib.px_barrier_waiting(self._p)

    def __repr__(self) -> str:
        return f"<parataxis.Barrier phase={self.phase}, {self.waiting} waiting>"


class Once(_Primitive):
    """An action run exactly once among racing fibers: do(fn, *args) runs it
    in the first caller (returning its result, or raising its exception);
    callers arriving meanwhile wait until it ended and return None, as do all
    later ones.  A failed action counts as done: it is not retried."""

    __slots__ = ()
    _what = "Once"

    def __init__(self, *, name: Optional[str] = None) -> None:
        self._own(_host.K_ONCE, 0, "px_once *", name)

    def do(self, fn: Callable[..., T], *args: Any) -> Optional[T]:
        """Runs fn(*args) if no fiber has: returns its result (or raises its
        exception); else returns None once the action ended.

        May wait (while another fiber runs the action).  Raises Timeout /
        Cancelled from the scopes while waiting (nothing ran)."""
        self._bind()
        if not self._check(_wait(_ONCE_BEGIN, self._h)):
            return None
        try:
            return fn(*args)
        finally:
            lib.px_once_end(self._p)

    @property
    def done(self) -> bool:
        """True once the action ended (returned or raised)."""
        return bool(lib.px_once_done(self._p))

    def __repr__(self) -> str:
        return f"<parataxis.Once {'done' if self.done else 'not done'}>"


class Semaphore(_Primitive):
    """A count of free units: acquire() waits for one (FIFO), release() gives
    one back (to the first waiter, directly).  with s: holds one.  Units are
    not owned: any fiber may release."""

    __slots__ = ()
    _what = "Semaphore"

    def __init__(self, value: int = 1, *, name: Optional[str] = None) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError("Semaphore(value): an int")
        if value < 0:
            raise ValueError("Semaphore(value): value >= 0")
        self._own(_host.K_SEM, value, "px_sem *", name)

    def acquire(self) -> None:
        """Takes one unit, waiting for one if none is free (FIFO).

        May wait.  Raises Timeout / Cancelled from the scopes (nothing taken)."""
        self._bind()
        rc = _wait(_ACQUIRE, self._h)
        if rc:
            self._check(rc)

    def acquire_case(self) -> "SelectCase":
        """A case of px.select that takes one unit (its value: None)."""
        return SelectCase(_SEL_SEM, self, (_SEL_SEM, self._h))

    def try_acquire(self) -> bool:
        """Takes one unit if one is free and nobody waits: True; else False.
        Never waits."""
        self._bind()
        rc = lib.px_sem_tryacquire(self._p)
        if rc == _EBUSY:
            return False
        self._check(rc)
        return True

    def release(self) -> None:
        """Gives one unit back: to the first waiter, else to the count.
        Never waits."""
        self._bind()
        self._check(lib.px_sem_release(self._p))

    @property
    def value(self) -> int:
        """How many units are free."""
        return lib.px_sem_value(self._p)

    @property
    def waiters(self) -> int:
        """How many fibers wait in acquire()."""
        return lib.px_sem_waiters(self._p)

    def __enter__(self) -> "Semaphore":
        """acquire() (may wait)."""
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        """release()."""
        self.release()

    def __repr__(self) -> str:
        return f"<parataxis.Semaphore value={self.value}, {self.waiters} waiting>"


class Event(_Primitive):
    """A level: wait() returns at once while set, else waits until set()."""

    __slots__ = ()
    _what = "Event"

    def __init__(self, *, name: Optional[str] = None) -> None:
        self._own(_host.K_EVENT, 0, "px_event *", name)

    def set(self) -> int:
        """Sets it and wakes every waiter; returns how many it woke.
        Never waits."""
        self._bind()
        return self._check(lib.px_event_set(self._p))

    def clear(self) -> None:
        """Unsets it (a waiter woken already still returns).  Never waits."""
        self._bind()
        self._check(lib.px_event_clear(self._p))

    def is_set(self) -> bool:
        """True while it is set.  Never waits; any thread."""
        return bool(lib.px_event_is_set(self._p))

    def wait(self) -> None:
        """Returns once it is set (at once if it is).

        May wait.  Raises Timeout / Cancelled from the scopes."""
        self._bind()
        rc = _wait(_EV_WAIT, self._h)
        if rc:
            self._check(rc)

    def wait_case(self) -> "SelectCase":
        """A case of px.select that fires while the event is set (its value:
        None)."""
        return SelectCase(_SEL_EVENT, self, (_SEL_EVENT, self._h))

    @property
    def waiters(self) -> int:
        """How many fibers wait in wait() (and select cases on it)."""
        return lib.px_event_waiters(self._p)

    def __repr__(self) -> str:
        return f"<parataxis.Event {'set' if self.is_set() else 'clear'}>"


class Channel(_Primitive, Generic[T]):
    """A FIFO of values between fibers.  capacity 0 (unbuffered): send()
    returns once a receiver took the value.  close(): receivers get what is
    buffered, then Closed; senders get Closed.  Iterating receives until the
    channel is closed and drained."""

    __slots__ = ("_values", "_next", "_slot", "_closed")
    _what = "Channel"

    def __init__(self, capacity: int = 0, *, name: Optional[str] = None) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int):
            raise TypeError("Channel(capacity): an int")
        if capacity < 0:
            raise ValueError("Channel(capacity): capacity >= 0")
        self._own(_host.K_CHAN, capacity, "px_chan *", name)
        # C carries keys; the values wait here.  One slot serves every
        # receiver: a receive reads it before any other fiber runs.  recv's is
        # the Prim's (wait fills it); try_recv's is the void * px_chan_tryrecv
        # fills, typed uintptr_t so that reading it gives an int without a
        # cffi cast.
        self._values: Dict[int, T] = {}
        self._next = itertools.count(1).__next__
        self._slot = ffi.new("uintptr_t *")
        self._closed = False

    def send(self, value: T) -> None:
        """Sends value: returns once a receiver took it (capacity 0) or it is
        buffered.

        May wait.  Raises Closed when the channel is closed (also while
        waiting), Timeout / Cancelled from the scopes (not sent)."""
        self._bind()
        key = self._next()
        self._values[key] = value
        rc = _wait(_SEND, self._h, key)
        if rc:
            del self._values[key]
            self._fail(rc)

    def recv(self) -> T:
        """Returns the next value, waiting for one.

        May wait.  Raises Closed once the channel is closed and drained,
        Timeout / Cancelled from the scopes (nothing received)."""
        self._bind()
        rc = _wait(_RECV, self._h)
        if rc:
            self._fail(rc)
        return self._values.pop(self._h.slot)

    def recv_case(self) -> "SelectCase":
        """A case of px.select that receives a value (its value: the one
        received); on a closed and drained channel select raises Closed."""
        return SelectCase(_SEL_RECV, self, (_SEL_RECV, self._h))

    def send_case(self, value: T) -> "SelectCase":
        """A case of px.select that sends value (its value: None); a case that
        loses never delivers it.  On a closed channel select raises Closed."""
        return SelectCase(_SEL_SEND, self, None, value)

    def try_send(self, value: T) -> bool:
        """Sends value if a receiver waits or the buffer has room: True;
        False when it would wait.  Never waits; Closed when closed."""
        self._bind()
        key = self._next()
        self._values[key] = value
        rc = lib.px_chan_trysend(self._p, ffi.cast("void *", key))
        if rc:
            del self._values[key]
            if rc == _EBUSY:
                return False
            self._fail(rc)
        return True

    def try_recv(self) -> Tuple[bool, Optional[T]]:
        """Receives without waiting: (True, value), or (False, None) when it
        would wait.  Raises Closed once closed and drained."""
        self._bind()
        rc = lib.px_chan_tryrecv(self._p, ffi.cast("void **", self._slot))
        if rc == _EBUSY:
            return False, None
        if rc:
            self._fail(rc)
        return True, self._values.pop(self._slot[0])

    def close(self) -> None:
        """Closes it: waiting senders raise Closed, receivers get what is
        buffered, then Closed.  Never waits; Closed if it was closed."""
        self._bind()
        rc = lib.px_chan_close(self._p)
        if rc:
            self._fail(rc)
        self._closed = True

    @property
    def closed(self) -> bool:
        """True once close() was called."""
        return self._closed

    def __len__(self) -> int:
        """How many values are buffered."""
        return lib.px_chan_len(self._p)

    @property
    def capacity(self) -> int:
        """The buffer's size (0: unbuffered)."""
        return lib.px_chan_cap(self._p)

    @property
    def waiters(self) -> int:
        """How many fibers wait in send() or recv() (and select cases on it)."""
        return lib.px_chan_waiters(self._p)

    def __iter__(self) -> Iterator[T]:
        """recv() until the channel is closed and drained (may wait)."""
        while True:
            try:
                yield self.recv()
            except Closed:
                return

    def _fail(self, rc: int) -> None:
        if rc == _ECLOSED:
            raise Closed("the channel is closed")
        self._check(rc)

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<parataxis.Channel {state}, {len(self)}/{self.capacity}>"



# -- select -------------------------------------------------------------------

_SEL_SEND = _host.SELECT_SEND
_SEL_RECV = _host.SELECT_RECV
_SEL_EVENT = _host.SELECT_EVENT
_SEL_SEM = _host.SELECT_SEM
_SEL_FD = _host.SELECT_FD
_SEL_DEADLINE = _host.SELECT_DEADLINE
_SEL_DEFAULT_SPEC = (_host.SELECT_DEFAULT, None)
_SEL_OFF_SPEC = (_SEL_RECV, None)            # a case without an object: never fires
_select = _host.select
_INT64_MAX = (1 << 63) - 1


class SelectCase:
    """One case of px.select, made by Channel.recv_case() / send_case(v),
    Event.wait_case(), Semaphore.acquire_case(), px.readable_case(fd),
    px.writable_case(fd) or px.deadline_case(t).  It does nothing until
    select is called; one case may be passed to many selects."""

    __slots__ = ("_kind", "_obj", "_spec", "_value")

    def __init__(self, kind: int, obj: Any, spec: Optional[Tuple[Any, ...]],
                 value: Any = None) -> None:
        self._kind = kind
        self._obj = obj
        self._spec = spec
        self._value = value

    def __repr__(self) -> str:
        what = {_SEL_SEND: "send", _SEL_RECV: "recv", _SEL_EVENT: "wait",
                _SEL_SEM: "acquire", _SEL_FD: "fd", _SEL_DEADLINE: "deadline"}[self._kind]
        if self._kind == _SEL_FD:
            assert self._spec is not None
            how = {1: "readable", 2: "writable"}.get(self._spec[3], "ready")
            return f"<parataxis.SelectCase {how} fd {self._spec[2]}>"
        if self._kind == _SEL_DEADLINE:
            assert self._spec is not None
            return f"<parataxis.SelectCase deadline {self._spec[2] / 1e9}>"
        return f"<parataxis.SelectCase {what} on {self._obj!r}>"


def _drop(sends: Optional[List[Tuple[int, "Channel[Any]", int]]]) -> None:
    # The values of send cases that never went out.
    for _, ch, key in sends or ():
        ch._values.pop(key, None)


def _fd_case(obj: Any, events: int) -> SelectCase:
    fd = _fd(obj)
    if fd < 0:
        raise InvalidArgument(f"select: fd {fd} is negative")
    return SelectCase(_SEL_FD, None, (_SEL_FD, None, fd, events))


def readable_case(fd: Any) -> SelectCase:
    """A case of px.select that fires once `fd` (an fd, or anything with
    fileno()) has something to read, an error or a hang-up (its value: None).
    select raises ClosedResourceError when notify_closing(fd) ran while it
    waited.  Raises InvalidArgument for a negative fd, TypeError for no fd."""
    return _fd_case(fd, 1)


def writable_case(fd: Any) -> SelectCase:
    """A case of px.select that fires once `fd` has room to write (its value:
    None); as readable_case."""
    return _fd_case(fd, 2)


def deadline_case(deadline: float) -> SelectCase:
    """A case of px.select that fires once px.now() reached `deadline`
    (seconds on px.now()'s clock; one in the past fires at once, math.inf
    never; its value: None).  Raises InvalidArgument for NaN, TypeError for a
    non-number."""
    if isinstance(deadline, bool) or not isinstance(deadline, (int, float)):
        raise TypeError(f"deadline_case: a number of seconds, not {type(deadline).__name__}")
    if math.isnan(deadline):
        raise InvalidArgument("deadline_case: NaN")
    if math.isinf(deadline):
        ns = _INT64_MAX if deadline > 0 else -_INT64_MAX
    else:
        ns = max(-_INT64_MAX, min(_INT64_MAX, math.ceil(deadline * 1_000_000_000)))
    return SelectCase(_SEL_DEADLINE, None, (_SEL_DEADLINE, None, ns))


class _NoDefault:
    def __repr__(self) -> str:
        return "<no default>"


_NO_DEFAULT: Any = _NoDefault()


@overload
def select(*cases: Optional[SelectCase]) -> Tuple[int, Any]: ...
@overload
def select(*cases: Optional[SelectCase], default: Any) -> Tuple[Optional[int], Any]: ...


def select(*cases: Optional[SelectCase], default: Any = _NO_DEFAULT) -> Tuple[Optional[int], Any]:
    """Waits for the first of `cases` that is ready, completes that one only,
    and returns (its index, its value): the value received for a recv_case,
    None for the other kinds.

    Exactly one case takes effect: a send_case that loses never delivers its
    value, a recv_case or acquire_case that loses takes nothing, and nothing of
    the call stays queued.  Among the cases ready when it looks, each is as
    likely to fire as another (Go's select).  A case given as None never fires
    (Go's nil channel: switch a case off in place, keeping the indexes).

    With `default=` given, select never waits: when no case is ready it
    returns (None, default).  Without it, it waits -- bounded by the scopes
    around it (Timeout / Cancelled: nothing taken, nothing sent), forever when
    no case can fire.

    A recv_case or send_case on a closed channel fires too: select raises
    Closed, as recv() and send() do, its `index` the case's (a recv_case gets
    what is buffered first).  A readable_case/writable_case whose fd
    notify_closing closed while it waited raises ClosedResourceError so.
    Raises TypeError for what is not a case, InvalidArgument for an fd that is
    not open, BusyError when another fiber waits on the same fd the same way,
    NoFiberError off-fiber unless `default=` is given, WrongSchedulerError for
    an object another run's fibers wait on.
    """
    spec: List[Any] = []
    sends: Optional[List[Tuple[int, Channel[Any], int]]] = None
    run = _host.current()
    for c in cases:
        if c is None:
            spec.append(_SEL_OFF_SPEC)
            continue
        if type(c) is not SelectCase:
            _drop(sends)
            raise TypeError(f"select: a case (ch.recv_case(), ...) or None, "
                            f"not {type(c).__name__}")
        obj = c._obj
        if obj is not None and (obj._run is not run or run is None):
            obj._bind_off_fiber()
        if c._kind == _SEL_SEND:
            key = obj._next()
            obj._values[key] = c._value
            if sends is None:
                sends = []
            sends.append((len(spec), obj, key))
            spec.append((_SEL_SEND, obj._h, key))
        else:
            spec.append(c._spec)
    if default is not _NO_DEFAULT:
        spec.append(_SEL_DEFAULT_SPEC)
    if sends is None:
        i, result, slot = _select(spec)
    else:
        try:
            i, result, slot = _select(spec)
        except BaseException:
            _drop(sends)
            raise
        for j, ch, key in sends:        # the losers' values were never delivered
            if j != i or result != 0:
                ch._values.pop(key, None)
    if i < 0:
        if i == lib.PX_EINVAL:
            raise InvalidArgument("select: a case's fd is not open")
        _raise_wait(i, "select")
    if i == len(cases):
        return None, default
    if result != 0:
        case = cases[i]
        assert case is not None
        err: Closed
        if case._kind == _SEL_FD:
            err = ClosedResourceError(f"select: case {i}: the fd was closed while a "
                                      f"fiber waited on it")
        else:
            err = Closed(f"select: case {i}: the channel is closed")
        err.index = i
        raise err
    if slot:
        case = cases[i]
        assert case is not None
        return i, case._obj._values.pop(slot)
    return i, None
