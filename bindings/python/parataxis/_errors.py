"""The exception hierarchy, all under parataxis.Error: one class per C error code
that a call of this binding can return.  Any other code raises Error itself,
with px_strerror's text."""
from __future__ import annotations

import errno
from typing import Dict, NoReturn, Optional, Type

from ._parataxis import ffi, lib


class Error(Exception):
    """Base of every parataxis exception; `code` is the C PX_E* value (or 0)."""

    code: int = 0

    def __init__(self, *args: object) -> None:
        if not args and self.code:
            args = (ffi.string(lib.px_strerror(self.code)).decode(),)
        super().__init__(*args)


class InvalidArgument(Error, ValueError):
    """An argument is out of range (a negative duration, a count below zero)."""

    code = lib.PX_EINVAL


class NoMemory(Error, MemoryError):
    """The C library ran out of memory; nothing was done."""

    code = lib.PX_ENOMEM


class Closed(Error, RuntimeError):
    """The object was closed (or is shutting down).  Raised by px.select,
    `index` is the case that fired on the closed channel (or fd); else None."""

    code = lib.PX_ECLOSED
    index: Optional[int] = None


class ClosedResourceError(Closed, OSError):
    """The fd was closed while a fiber waited on it: notify_closing(fd) ran
    (close() of a parataxis socket does it), in any thread.  trio's name for
    it; an OSError with errno EBADF too, as a call on a closed socket raises,
    so `except OSError` code keeps working."""

    code = lib.PX_ECLOSED

    def __init__(self, message: str = "closed while a fiber waited on it") -> None:
        OSError.__init__(self, errno.EBADF, message)


class ForkedError(Closed):
    """The object belongs to the parent of a fork(): unusable in the child."""

    code = lib.PX_EFORKED


class Timeout(Error, TimeoutError):
    """A timeout scope (px.timeout, px.move_on_after) ended the wait."""

    code = lib.PX_ETIMEDOUT


class Cancelled(Error):
    """A cancel scope's token, or the end of the run, ended the wait."""

    code = lib.PX_ECANCELED


class DeadlockError(Error):
    """The wait could never end: a fiber joining itself, an RwLock upgrade, or
    (from px.run) fibers left waiting on each other -- the message is the
    engine's report, naming each waiting fiber and the wait-for cycle."""

    code = lib.PX_EDEADLK


class OwnerDiedError(Error):
    """Acquired -- the caller holds the lock now -- but its previous owner
    ended holding it: what it guards may be half-updated."""

    code = lib.PX_EOWNERDEAD


class NotOwnerError(Error, PermissionError):
    """The caller does not hold what it tried to release."""

    code = lib.PX_EPERM


class NoFiberError(Error, RuntimeError):
    """The call needs a fiber (inside px.run) and there is none."""

    code = lib.PX_ENOFIBER


class BusyError(Error, RuntimeError):
    """In use: px.run inside a run, or a primitive that waiters still need."""

    code = lib.PX_EBUSY


class NotSupportedError(Error, ValueError):
    """PX_ENOTSUP: the object cannot do that -- a file descriptor that epoll
    refuses (a regular file, a directory) given to an I/O wait: such a file is
    always "ready", and its reads block the thread; use run_blocking."""

    code = lib.PX_ENOTSUP


class WrongSchedulerError(Error, RuntimeError):
    """PX_ETHREAD: called from the wrong thread -- a sync object that fibers
    of another run wait on or hold (the call would wait beside them, take a
    hold beside them or hand over to them; nothing changed), or a fiber or
    scheduler of another thread's run."""

    code = lib.PX_ETHREAD


_ALL = (Error, InvalidArgument, NoMemory, Closed, ForkedError, Timeout, Cancelled,
        DeadlockError, OwnerDiedError, NotOwnerError, NoFiberError, BusyError,
        WrongSchedulerError, NotSupportedError, ClosedResourceError)

# Shown, printed and pickled as parataxis.Closed etc., where users import them.
for _cls in _ALL:
    _cls.__module__ = "parataxis"
del _cls

# Code -> class, from the classes: each names its code once, as the header's
# constant (lib.PX_E*, which cffi takes from parataxis.h), never as a number
# or a string of its own.  Every code px_errname knows has its class here but
# PX_EYIELD and PX_EINTR, which the binding acts on and never raises
# (test_every_code_of_the_header_raises_its_own_exception).
_BY_CODE: Dict[int, Type[Error]] = {c.code: c for c in _ALL[1:-1]}


def raise_for(code: int) -> NoReturn:
    """Raise the exception that C error `code` maps to."""
    cls = _BY_CODE.get(code)
    if cls is None:
        raise Error(ffi.string(lib.px_strerror(code)).decode())
    raise cls()


def check(code: int) -> int:
    """Return `code` when it is not an error, else raise its exception."""
    if code < 0:
        raise_for(code)
    return code


_DIRECTIONS = {1: "read", 2: "write", 3: "read or write"}


def raise_fd(code: int, fd: int, events: int) -> NoReturn:
    """Raise the exception of a wait on `fd` (for `events`, PX_READABLE 1,
    PX_WRITABLE 2) that ended with C code `code`: the I/O's own names where
    they differ from raise_for's."""
    how = _DIRECTIONS.get(events, "use")
    if code == lib.PX_ETIMEDOUT:
        raise Timeout(f"wait to {how} fd {fd}: timed out")
    if code == lib.PX_ECANCELED:
        raise Cancelled(f"wait to {how} fd {fd}: cancelled")
    if code == lib.PX_ECLOSED:
        raise ClosedResourceError(f"fd {fd} was closed while a fiber waited to {how} it")
    if code == lib.PX_EBUSY:
        raise BusyError(f"another fiber already waits to {how} fd {fd}")
    if code == lib.PX_ENOTSUP:
        raise NotSupportedError(f"fd {fd} cannot be waited on (a regular file or a "
                                "directory is always ready): use run_blocking")
    if code == lib.PX_EINVAL:
        raise InvalidArgument(f"fd {fd} cannot be waited on: negative, not open, or the "
                              "scheduler's own")
    raise_for(code)
