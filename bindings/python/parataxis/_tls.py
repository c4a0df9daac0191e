"""TLS for fibers: the standard ssl module over a non-blocking socket.

wrap_socket(context, sock, ...) gives an SSLSocket whose calls park only the
calling fiber.  The TLS itself is the standard library's: the socket is
wrapped by `context.wrap_socket` in non-blocking mode, and each call is made
on it until it stops raising ssl.SSLWantReadError / SSLWantWriteError, the
fiber waiting in between for the fd to be readable / writable (the wait of
px.wait_readable / px.wait_writable, so every scope bounds it).

Composition, not a subclass of ssl.SSLSocket: ours holds a standard
SSLSocket kept in non-blocking mode and offers the calls of a TLS socket
that a program makes.  A subclass would inherit every method of
socket.socket and ssl.SSLSocket, each blocking the thread, or failing with
SSLWantReadError, unless overridden -- accept, recvfrom, sendfile, dup,
sendmsg... -- and one forgotten override is a call that hangs the whole
run; it would also share the standard class's timeout, which must stay 0.0
for the ssl module to return on SSL_ERROR_WANT_*.  Held inside, the standard
socket is reached only through the calls below, each a loop that waits in
the fiber, and the user's timeout is ours (`settimeout`, `gettimeout`).

The timeout applies per call, as the standard ssl socket's does: a recv, a
send, a sendall, a handshake, an unwrap each raise TimeoutError("timed out"),
as a px.socket does, once it has passed since the call began.  None (the
default of a socket, and of a px.socket) waits as long as needed; 0.0 is
non-blocking mode: the ssl module's SSLWantReadError and SSLWantWriteError
reach the caller, as from a non-blocking ssl.SSLSocket.
"""
from __future__ import annotations

import math
import select
import socket as _socket
import ssl
from typing import Any, Callable, List, Optional, Tuple, TypeVar, Union

from . import _host
from ._errors import BusyError, ClosedResourceError
from ._fibers import move_on_after
from ._net import _NEVER, _timeout_ns, notify_closing
from ._net import socket as _pxsocket
from ._parataxis import lib
from ._sync import Event

T = TypeVar("T")

_READ, _WRITE = 0, 1
_EVENTS = (_host.READABLE, _host.WRITABLE)
_BOTH = (_READ, _WRITE)
_POLL_EVENTS = (select.POLLIN, select.POLLOUT)


class _Parked:
    """A fiber parked on one direction of the fd, for a fiber that needs the
    same direction meanwhile: the fd admits one waiter a direction (a second
    is px.BusyError), so the second waits for the first to wake instead."""

    __slots__ = ("woken",)

    def __init__(self) -> None:
        self.woken: Any = None   # a px.Event, made by the second fiber if one comes


def _busy_error(d: int) -> BusyError:
    what = "receiving from" if d == _READ else "sending on"
    return BusyError(f"another fiber is {what} this TLS socket")


def wrap_socket(context: ssl.SSLContext, sock: _socket.socket, *, server_side: bool = False,
                server_hostname: Optional[str] = None, do_handshake_on_connect: bool = True,
                suppress_ragged_eofs: bool = True,
                session: Optional[ssl.SSLSession] = None) -> "SSLSocket":
    """A fiber-aware TLS socket over the connected socket `sock` (a px.socket,
    or a socket.socket, which is made non-blocking), as
    `context.wrap_socket(sock, ...)` would make, with `sock`'s timeout.  `sock`
    is taken over (detached), as ssl does.  With `do_handshake_on_connect`,
    the handshake happens here, in the calling fiber, within that timeout."""
    timeout = sock.gettimeout()
    # Refused before anything is detached, so that `sock` stays the caller's:
    # the standard SSLSocket makes its TLS object on a connected socket only
    # (getpeername's ENOTCONN says the socket is not).
    if do_handshake_on_connect and timeout == 0.0:
        raise ValueError("do_handshake_on_connect should not be specified for "
                         "non-blocking sockets")
    sock.getpeername()
    inner = context.wrap_socket(sock, server_side=server_side, server_hostname=server_hostname,
                                do_handshake_on_connect=False,
                                suppress_ragged_eofs=suppress_ragged_eofs, session=session)
    inner.setblocking(False)
    tls = SSLSocket(inner, timeout)
    if do_handshake_on_connect:
        try:
            tls.do_handshake()
        except BaseException:
            tls.close()
            raise
    return tls


class SSLSocket:
    """A TLS connection whose calls park only the calling fiber (make one with
    px.wrap_socket).  Off-fiber it blocks the thread, as a px.socket does.

    One fiber may receive while another sends; a second fiber receiving (or
    sending) while one already does gets px.BusyError at once, as a second
    waiter on an fd does.  close() wakes the fibers waiting in its calls
    with px.ClosedResourceError.  A send or sendall that a timeout or a scope
    ended may have sent part of its data: the connection can only be closed.
    """

    def __init__(self, inner: ssl.SSLSocket, timeout: Optional[float]) -> None:
        self._ssl: Optional[ssl.SSLSocket] = inner
        self._fd = inner.fileno()
        self._ns = _timeout_ns(timeout)    # ns, _NEVER (-1): no timeout
        self._busy = [False, False]        # a call receiving, a call sending
        self._parked: List[Optional[_Parked]] = [None, None]   # per direction
        self._closed = False
        self._io_refs = 0                  # open makefile()s: close waits for them

    # -- waiting -------------------------------------------------------------

    def _call(self, d: int, op: Callable[..., T], *args: Any) -> T:
        """op(*args) on the standard socket until it stops wanting I/O, with
        direction `d` (_READ: a receive, _WRITE: a send) claimed meanwhile."""
        busy = self._busy
        if busy[d]:
            raise _busy_error(d)
        busy[d] = True
        try:
            return self._retry(None, op, *args)
        finally:
            busy[d] = False

    def _call_both(self, op: Callable[..., T]) -> T:
        """op() as _call does, with both directions claimed: a handshake or
        a shutdown, which reads and writes in turn."""
        for d in _BOTH:
            if self._busy[d]:
                raise _busy_error(d)
        self._busy[:] = [True, True]
        try:
            return self._retry(None, op)
        finally:
            self._busy[:] = [False, False]

    def _retry(self, want: Optional[int], op: Callable[..., T], *args: Any) -> T:
        """Waits for `want` (None: no wait first), tries op(*args), and so on
        until op stops wanting I/O.  The timeout counts from the first wait:
        most calls need none, and pay no clock read."""
        deadline: Optional[int] = None
        while True:
            if want is not None:
                if deadline is None:
                    deadline = _NEVER if self._ns == _NEVER else lib.px_now() + self._ns
                left = _NEVER if deadline == _NEVER else max(deadline - lib.px_now(), 0)
                self._wait(want, left)
                if self._ssl is None:
                    raise self._closed_error()
            try:
                return op(*args)
            except ssl.SSLWantReadError:
                if self._ns == 0:
                    raise
                want = _READ
            except ssl.SSLWantWriteError:
                if self._ns == 0:
                    raise
                want = _WRITE

    def _wait(self, want: int, left: int) -> None:
        """Waits until the fd is ready for `want`, or raises
        TimeoutError("timed out") once `left` ns passed (-1: never)."""
        if lib.px_self() == 0:
            return self._poll(want, left)
        parked = self._parked[want]
        if parked is not None:
            return self._wait_beside(parked, left)
        self._parked[want] = parked = _Parked()
        try:
            _host.wait_fd(self._fd, _EVENTS[want], left)
        finally:
            self._parked[want] = None
            if parked.woken is not None:
                parked.woken.set()
        return None

    @staticmethod
    def _wait_beside(parked: _Parked, left: int) -> None:
        """Another fiber of this socket waits on the direction already (a
        receive whose TLS must write, beside a sendall): its wake is ours
        too, then the call is tried again."""
        if parked.woken is None:
            parked.woken = Event()
        if left == _NEVER:
            parked.woken.wait()
            return
        with move_on_after(left / 1e9) as scope:
            parked.woken.wait()
        if scope.expired:
            raise TimeoutError("timed out")

    def _poll(self, want: int, left: int) -> None:
        """Off-fiber: the thread waits, as a blocking socket's does."""
        p = select.poll()
        p.register(self._fd, _POLL_EVENTS[want])
        if not p.poll(None if left == _NEVER else math.ceil(left / 1e6)):
            raise TimeoutError("timed out")

    def _closed_error(self) -> ClosedResourceError:
        return ClosedResourceError("the TLS socket was closed")

    # -- the TLS calls -------------------------------------------------------

    def do_handshake(self) -> None:
        """The TLS handshake (done by wrap_socket unless
        do_handshake_on_connect=False)."""
        self._call_both(self._inner().do_handshake)

    def recv(self, buflen: int = 1024, flags: int = 0) -> bytes:
        """At most `buflen` bytes of plain text; b"" once the peer closed."""
        return self._call(_READ, self._inner().recv, buflen, flags)

    def recv_into(self, buffer: Any, nbytes: Optional[int] = None, flags: int = 0) -> int:
        """Reads into `buffer` (at most `nbytes`, else its size); the count."""
        return self._call(_READ, self._inner().recv_into, buffer, nbytes, flags)

    def read(self, len: int = 1024, buffer: Any = None) -> Union[bytes, int]:
        """ssl.SSLSocket.read: bytes, or the count read into `buffer`."""
        return self._call(_READ, self._inner().read, len, buffer)

    def send(self, data: Any, flags: int = 0) -> int:
        """Sends `data` (TLS writes all of it); the count."""
        return self._call(_WRITE, self._inner().send, data, flags)

    def write(self, data: Any) -> int:
        """ssl.SSLSocket.write: as send."""
        return self._call(_WRITE, self._inner().write, data)

    def sendall(self, data: Any, flags: int = 0) -> None:
        """Sends all of `data`; the timeout bounds the whole call."""
        inner = self._inner()
        if flags != 0:
            raise ValueError("non-zero flags not allowed in calls to sendall() on SSLSocket")
        if self._busy[_WRITE]:
            raise _busy_error(_WRITE)
        self._busy[_WRITE] = True
        try:
            with memoryview(data) as view, view.cast("B") as octets:
                sent, total = 0, len(octets)
                while sent < total:
                    sent += self._retry(None, inner.send, octets[sent:])
        finally:
            self._busy[_WRITE] = False

    def unwrap(self) -> _socket.socket:
        """Ends TLS (both close_notify alerts) and returns the connection as a
        px.socket with this socket's timeout, for plain text; this TLS socket
        is closed (fileno() -1)."""
        inner = self._inner()
        self._call_both(inner.unwrap)
        plain = _pxsocket(inner.family, inner.type, inner.proto, fileno=inner.detach())
        self._ssl = None
        self._closed = True
        plain.settimeout(self.gettimeout())
        return plain

    def close(self) -> None:
        """Closes the connection (without close_notify: unwrap sends it),
        once the files of makefile() are closed too.  Fibers waiting in a
        call on it get px.ClosedResourceError."""
        self._closed = True
        if self._io_refs <= 0:
            self._real_close()

    def _real_close(self) -> None:
        inner, self._ssl = self._ssl, None
        if inner is None:
            return
        # First wake the waiters on the fd (with ClosedResourceError): a
        # closed fd number may be reused at once by another file.
        notify_closing(self._fd)
        for parked in self._parked:
            if parked is not None and parked.woken is not None:
                parked.woken.set()
        inner.close()

    def _decref_socketios(self) -> None:
        """socket.SocketIO.close calls this: the last file lets close happen."""
        if self._io_refs > 0:
            self._io_refs -= 1
        if self._closed:
            self.close()

    # socket.socket's own makefile, as a function: it needs only what this
    # class has (recv_into, send, fileno, _io_refs, _decref_socketios).
    makefile = _socket.socket.makefile

    def _inner(self) -> ssl.SSLSocket:
        inner = self._ssl
        if inner is None:
            raise self._closed_error()
        return inner

    # -- the rest of a socket ------------------------------------------------

    def settimeout(self, value: Optional[float]) -> None:
        """None: wait as long as needed; seconds: the bound of each call;
        0.0: non-blocking (SSLWantReadError / SSLWantWriteError)."""
        self._ns = _timeout_ns(value)

    def gettimeout(self) -> Optional[float]:
        return None if self._ns == _NEVER else self._ns / 1e9

    def setblocking(self, flag: bool) -> None:
        self.settimeout(None if flag else 0.0)

    def getblocking(self) -> bool:
        return self._ns != 0

    def fileno(self) -> int:
        """The fd, -1 once closed.  Its readiness is not the TLS stream's:
        decrypted bytes may be pending (`pending()`) on a quiet fd."""
        return -1 if self._ssl is None else self._fd

    def pending(self) -> int:
        return self._inner().pending()

    def getpeercert(self, binary_form: bool = False) -> Any:
        return self._inner().getpeercert(binary_form)

    def cipher(self) -> Optional[Tuple[str, str, int]]:
        return self._inner().cipher()

    def version(self) -> Optional[str]:
        return self._inner().version()

    def selected_alpn_protocol(self) -> Optional[str]:
        return self._inner().selected_alpn_protocol()

    def getpeername(self) -> Any:
        return self._inner().getpeername()

    def getsockname(self) -> Any:
        return self._inner().getsockname()

    @property
    def server_hostname(self) -> Optional[str]:
        return None if self._ssl is None else self._ssl.server_hostname

    @property
    def server_side(self) -> bool:
        return self._ssl is not None and self._ssl.server_side

    @property
    def context(self) -> Optional[ssl.SSLContext]:
        return None if self._ssl is None else self._ssl.context

    @property
    def session(self) -> Optional[ssl.SSLSession]:
        return None if self._ssl is None else self._ssl.session

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> "SSLSocket":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        if self._ssl is None:
            return "<parataxis.SSLSocket [closed]>"
        return f"<parataxis.SSLSocket fd={self._fd} {self._ssl.version() or 'no handshake'}>"


SSLSocket.__module__ = "parataxis"
