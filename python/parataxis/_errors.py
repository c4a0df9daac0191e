"""The exception hierarchy, all under parataxis.Error: one class per C error code
that a call of this binding can return (the timer queue, the deadline timer and
the handler queue return only these; the fiber binding will add its own).  Any
other code raises Error itself, with px_strerror's text."""
from __future__ import annotations

from typing import Dict, NoReturn, Type

from ._parataxis import ffi, lib


class Error(Exception):
    """Base of every parataxis exception; `code` is the C PX_E* value (or 0)."""

    code: int = 0

    def __init__(self, *args: object) -> None:
        if not args and self.code:
            args = (ffi.string(lib.px_strerror(self.code)).decode(),)
        super().__init__(*args)


class InvalidArgument(Error, ValueError):
    code = lib.PX_EINVAL


class NoMemory(Error, MemoryError):
    code = lib.PX_ENOMEM


class Closed(Error, RuntimeError):
    """The object was closed (or is shutting down)."""

    code = lib.PX_ECLOSED


class ForkedError(Closed):
    """The object belongs to the parent of a fork(): unusable in the child."""

    code = lib.PX_EFORKED


# Shown, printed and pickled as parataxis.Closed etc., where users import them.
for _cls in (Error, InvalidArgument, NoMemory, Closed, ForkedError):
    _cls.__module__ = "parataxis"
del _cls

_BY_CODE: Dict[int, Type[Error]] = {
    c.code: c for c in (InvalidArgument, NoMemory, Closed, ForkedError)
}


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
