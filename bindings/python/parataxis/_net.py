"""Fibers that do I/O: waits on file descriptors, a fiber-aware socket, the
blocking pool and DNS on it.

A parataxis socket is a socket.socket whose file descriptor is non-blocking:
each call is tried at once, and only when it would block does the calling
fiber park in the C scheduler's epoll set until the fd is ready, then try
again -- so a wait that a scope ends leaves nothing half done, and no other
fiber stalls.  Nothing of the standard library is patched: a socket made by
another library becomes one with socket.from_socket(s).  Off-fiber (outside
px.run, or in its root), the same socket blocks its thread as the standard
one does.
"""
from __future__ import annotations

import _socket
import errno
import functools
import ipaddress
import os
import select
import socket as _std
from typing import Any, Callable, List, Optional, Tuple, TypeVar, Union

from . import _host
from ._errors import check
from ._parataxis import lib

T = TypeVar("T")

_READABLE = _host.READABLE
_WRITABLE = _host.WRITABLE
_NEVER = -1

FileLike = Union[int, "_std.socket", Any]


def _fd(obj: FileLike) -> int:
    if isinstance(obj, int):
        return obj
    fileno = getattr(obj, "fileno", None)
    if fileno is None:
        raise TypeError(f"an fd or an object with fileno() is needed, not {type(obj).__name__}")
    fd = fileno()
    if not isinstance(fd, int):
        raise TypeError("fileno() did not return an int")
    return fd


def wait_readable(obj: FileLike) -> None:
    """Parks the calling fiber until `obj` (an fd, or anything with fileno())
    has something to read -- or an error or hang-up, which the read reports.

    Waits.  Raises BusyError when another fiber of the run already waits to
    read it (one reader and one writer may wait at once), ClosedResourceError
    when notify_closing(obj) ran meanwhile, NotSupportedError for a regular
    file or a directory (always ready: use run_blocking), InvalidArgument for
    an fd that is negative or not open, Timeout / Cancelled from the scopes,
    NoFiberError off-fiber.  An outside wait: never a deadlock."""
    _host.wait_fd(_fd(obj), _READABLE, _NEVER)


def wait_writable(obj: FileLike) -> None:
    """Parks the calling fiber until `obj` has room to write; raises as
    wait_readable (BusyError for a second writer)."""
    _host.wait_fd(_fd(obj), _WRITABLE, _NEVER)


def notify_closing(obj: FileLike) -> None:
    """Wakes every fiber waiting on `obj`'s fd, in any run of the process,
    with ClosedResourceError, and forgets the fd: call it right before closing
    an fd that fibers may wait on (a parataxis socket's close() does).  Never
    waits; any thread.  InvalidArgument for a negative fd."""
    check(lib.px_fd_notify_closing(_fd(obj)))


def run_blocking(fn: Callable[..., T], *args: Any, abandon_on_cancel: bool = False) -> T:
    """Runs fn(*args) on a thread of the C blocking pool while only the
    calling fiber parks, and returns its result or raises its exception.

    The thread takes the GIL to run fn: what fn gains is every call that
    releases it (file and socket I/O, time.sleep, hashing, most C
    libraries).  When a scope fires: a job that has not started is dropped
    and fn never runs; a running one is waited for (its result is returned,
    and the scope's exception comes at the next wait) -- unless
    abandon_on_cancel, when Timeout / Cancelled is raised at once and fn's
    result, when it ends, is dropped.  The pool has at most 64 threads
    (PARATAXIS_BLOCKING_THREADS).  Raises NoFiberError off-fiber, ForkedError
    in the child of a fork whose parent used the pool."""
    if not callable(fn):
        raise TypeError("run_blocking: fn must be callable")
    result: T = _host.run_blocking(fn, args, abandon_on_cancel)
    return result


def blocking_cancelled() -> bool:
    """True inside a run_blocking job whose fiber gave up on it or was
    interrupted (a scope fired, the fiber ended), so that fn may stop early;
    False elsewhere.  Never waits; any thread."""
    return bool(lib.px_blocking_cancelled())


def _is_numeric(host: Any) -> bool:
    if host is None:
        return True
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except (AttributeError, ValueError):
        return False
    return True


def getaddrinfo(host: Any, port: Any, family: int = 0, type: int = 0, proto: int = 0,
                flags: int = 0) -> List[Tuple[Any, ...]]:
    """socket.getaddrinfo on the blocking pool: the lookup of a name parks
    only the calling fiber, and a scope that fires abandons it (the thread's
    result is dropped).  A numeric host needs no lookup and is resolved at
    once; off-fiber it is socket.getaddrinfo itself.  Raises socket.gaierror
    as socket.getaddrinfo does, Timeout / Cancelled from the scopes."""
    if _is_numeric(host) or lib.px_self() == 0:
        return _std.getaddrinfo(host, port, family, type, proto, flags)
    return run_blocking(_std.getaddrinfo, host, port, family, type, proto, flags,
                        abandon_on_cancel=True)


def _timeout_ns(value: Optional[float]) -> int:
    if value is None:
        return _NEVER
    if not isinstance(value, (int, float)):
        raise TypeError("Timeout value must be int, float or None")
    if not value >= 0.0:      # negative, or NaN
        raise ValueError("Timeout value out of range")
    # At least 1 ns when positive: only 0 makes the socket non-blocking, as
    # the standard socket rounds a timeout up to its clock's unit.
    ns = int(value * 1e9)
    return min(ns if ns > 0 or value == 0 else 1, 2**63 - 1)


def _resolve(address: Any, family: int, type: int) -> Any:
    """An (host, port[, ...]) address with its host resolved on the pool, so
    that connect/bind never look a name up on the run's thread."""
    if (family not in (_std.AF_INET, _std.AF_INET6) or not isinstance(address, tuple)
            or len(address) < 2 or _is_numeric(address[0]) or lib.px_self() == 0):
        return address
    infos = getaddrinfo(address[0], address[1], family, type)
    if not infos:
        raise _std.gaierror(_std.EAI_NONAME, "no address")
    return infos[0][4][:2] + tuple(address[2:])


class socket(_std.socket):
    """socket.socket whose blocking calls park only the calling fiber.

    The same constructor and methods: accept (a parataxis socket back),
    connect, recv, recv_into, recvfrom, recvfrom_into, recvmsg, recvmsg_into,
    send, sendall, sendto, sendmsg, sendmsg_afalg, sendfile, makefile,
    shutdown, close, settimeout / gettimeout /
    setblocking, a context manager.  The fd is always non-blocking; the
    timeout is the socket's own: None waits as long as it takes, 0 raises
    BlockingIOError instead of waiting, t > 0 raises TimeoutError("timed out")
    once t seconds passed in one call (sendall: the whole call), as the
    standard socket does.  Inside a fiber each wait is bounded by the scopes
    too (Timeout / Cancelled), raises BusyError when another fiber already
    waits on this socket in the same direction, and ClosedResourceError (an
    OSError, EBADF) when the socket is closed meanwhile: close() wakes its
    waiters.  Names given to connect, bind and create_connection are looked up
    on the blocking pool."""

    __slots__ = ("_px_ns",)

    def __init__(self, family: int = -1, type: int = -1, proto: int = -1,
                 fileno: Optional[int] = None) -> None:
        super().__init__(family, type, proto, fileno)
        self._px_ns = _timeout_ns(_std.getdefaulttimeout())
        _std.socket.setblocking(self, False)

    @classmethod
    def from_socket(cls, sock: _std.socket) -> "socket":
        """Takes over `sock`, a socket.socket made elsewhere, keeping its
        timeout: `sock` is detached (closed without closing the fd) and the
        new parataxis socket owns the fd."""
        timeout = sock.gettimeout()
        new = cls(sock.family, sock.type, sock.proto, fileno=sock.detach())
        new.settimeout(timeout)
        return new

    # -- the timeout, kept here: the fd stays non-blocking ---------------------

    def settimeout(self, value: Optional[float]) -> None:
        self._px_ns = _timeout_ns(value)

    def gettimeout(self) -> Optional[float]:
        return None if self._px_ns == _NEVER else self._px_ns / 1e9

    def setblocking(self, flag: bool) -> None:
        self._px_ns = _NEVER if flag else 0

    def getblocking(self) -> bool:
        return self._px_ns != 0

    @property
    def timeout(self) -> Optional[float]:
        return self.gettimeout()

    # -- the calls of every request: C functions bound as methods (_io.c) ------

    recv = _host.socket_recv
    recv_into = _host.socket_recv_into
    send = _host.socket_send
    sendall = _host.socket_sendall

    # -- the others: the standard call, and a wait when it would block ----------

    def _retry(self, events: int, call: Callable[..., T], *args: Any) -> T:
        ns = self._px_ns
        deadline = None
        while True:
            try:
                return call(*args)
            except BlockingIOError:
                if ns == 0:
                    raise
            if deadline is None and ns != _NEVER:
                deadline = lib.px_now() + ns
            left = _NEVER if deadline is None else max(deadline - lib.px_now(), 0)
            self._wait(events, left)

    def _wait(self, events: int, timeout_ns: int) -> None:
        if lib.px_self() != 0:
            _host.wait_fd(self.fileno(), events, timeout_ns)
            return
        # Off-fiber: the thread waits, as a blocking socket would -- with
        # poll(2), as it does: select(2) refuses an fd past FD_SETSIZE.
        p = select.poll()
        p.register(self, select.POLLIN if events == _READABLE else select.POLLOUT)
        if not p.poll(None if timeout_ns < 0 else timeout_ns / 1e6):
            raise TimeoutError("timed out")

    def accept(self) -> Tuple["socket", Any]:
        fd, addr = self._retry(_READABLE, self._accept)  # type: ignore[attr-defined]
        sock = socket(self.family, self.type, self.proto, fileno=fd)
        return sock, addr

    def recvfrom(self, bufsize: int, flags: int = 0) -> Tuple[bytes, Any]:
        return self._retry(_READABLE, super().recvfrom, bufsize, flags)

    def recvfrom_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> Tuple[int, Any]:
        return self._retry(_READABLE, super().recvfrom_into, buffer, nbytes, flags)

    def recvmsg(self, *args: Any) -> Any:
        return self._retry(_READABLE, super().recvmsg, *args)

    def recvmsg_into(self, *args: Any) -> Any:
        return self._retry(_READABLE, super().recvmsg_into, *args)

    def sendmsg_afalg(self, *args: Any, **kwargs: Any) -> int:
        # Its op, iv, assoclen and flags are keywords: _retry passes none.
        call = functools.partial(super().sendmsg_afalg, *args, **kwargs)
        return self._retry(_WRITABLE, call)

    def sendto(self, data: Any, *args: Any) -> int:
        return self._retry(_WRITABLE, super().sendto, data, *args)

    def sendmsg(self, *args: Any) -> int:
        return self._retry(_WRITABLE, super().sendmsg, *args)

    def connect(self, address: Any) -> None:
        err = self.connect_ex(address)
        if err:
            raise OSError(err, os.strerror(err))

    def connect_ex(self, address: Any) -> int:
        """As connect, but returns the errno instead of raising it (0 when
        connected); a timeout, a scope, a closed socket still raise."""
        address = _resolve(address, self.family, self.type)
        err = super().connect_ex(address)
        if err != errno.EINPROGRESS or self._px_ns == 0:
            return err
        self._wait(_WRITABLE, self._px_ns)
        return self.getsockopt(_std.SOL_SOCKET, _std.SO_ERROR)

    def bind(self, address: Any) -> None:
        super().bind(_resolve(address, self.family, self.type))

    def sendfile(self, file: Any, offset: int = 0, count: Optional[int] = None) -> int:
        """Sends a file with send() (the file is read on the run's thread)."""
        sent: int = self._sendfile_use_send(file, offset, count)  # type: ignore[attr-defined]
        return sent

    def dup(self) -> "socket":
        new = socket(self.family, self.type, self.proto, fileno=os.dup(self.fileno()))
        new.settimeout(self.gettimeout())
        return new

    def _real_close(self, _ss: Any = _socket.socket) -> None:
        fd = self.fileno()
        if fd >= 0:
            lib.px_fd_notify_closing(fd)
        _ss.close(self)

    def __repr__(self) -> str:
        return super().__repr__().replace("<socket.socket", "<parataxis.socket", 1)


socket.__module__ = "parataxis"


def create_connection(address: Tuple[Any, Any], timeout: Optional[float] = None,
                      source_address: Optional[Tuple[Any, Any]] = None) -> socket:
    """Connects a parataxis TCP socket to (host, port), trying each address
    the name resolves to (on the blocking pool) until one connects, as
    socket.create_connection; `timeout` is the socket's (None: block;
    socket._GLOBAL_DEFAULT_TIMEOUT, which http.client passes: the default's).
    Raises the last address's error."""
    host, port = address
    err: Optional[BaseException] = None
    for family, type_, proto, _, addr in getaddrinfo(host, port, 0, _std.SOCK_STREAM):
        sock = socket(family, type_, proto)
        try:
            if timeout is not _std._GLOBAL_DEFAULT_TIMEOUT:   # type: ignore[attr-defined]
                sock.settimeout(timeout)
            if source_address is not None:
                sock.bind(source_address)
            sock.connect(addr)
            return sock
        except OSError as e:
            err = e
            sock.close()
        except BaseException:
            sock.close()
            raise
    if err is None:
        raise OSError("getaddrinfo returned no address")
    raise err


def create_server(address: Tuple[Any, Any], *, family: int = _std.AF_INET,
                  backlog: Optional[int] = None, reuse_port: bool = False,
                  dualstack_ipv6: bool = False) -> socket:
    """A listening parataxis TCP socket bound to `address`, as
    socket.create_server (SO_REUSEADDR set); ("", 0): any address, a port the
    kernel picks (getsockname() says which).  A name in `address` is looked up
    on the blocking pool."""
    if address[0] not in ("", None):
        address = _resolve(tuple(address), family, _std.SOCK_STREAM)
    return socket.from_socket(_std.create_server(address, family=family, backlog=backlog,
                                                 reuse_port=reuse_port,
                                                 dualstack_ipv6=dualstack_ipv6))
