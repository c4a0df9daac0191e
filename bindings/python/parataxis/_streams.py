"""Byte streams over parataxis sockets, for application code: a TCP
connection as a SocketStream (receive_some / send_all / receive_line), a
client's open_tcp_stream and a server's serve_tcp, which runs a handler fiber
per connection and cancels them all when it stops."""
from __future__ import annotations

import errno
import socket as _std
import sys
import traceback
from typing import Any, Callable, Dict, Optional

from ._errors import Cancelled, ClosedResourceError, Error
from ._fibers import CancellationToken, Fiber, cancel_scope, current_id, sleep, spawn
from ._net import create_connection, create_server, socket

_DEFAULT_MAX = 65536


class SocketStream:
    """A connected stream socket as a byte stream.  `socket` is the
    parataxis socket underneath (for setsockopt, getpeername...).  Every call
    waits as the socket's do: bounded by the scopes, ClosedResourceError when
    closed meanwhile.  A context manager that closes it."""

    __slots__ = ("socket", "_buf")

    def __init__(self, sock: socket) -> None:
        if not isinstance(sock, socket):
            raise TypeError("SocketStream needs a parataxis.socket (socket.from_socket(s))")
        self.socket = sock
        self._buf = bytearray()

    def receive_some(self, max_bytes: int = _DEFAULT_MAX) -> bytes:
        """Some bytes, at most max_bytes, as soon as there are any; b"" once
        the peer closed its end."""
        if max_bytes < 1:
            raise ValueError("receive_some: max_bytes must be at least 1")
        if self._buf:
            data = bytes(self._buf[:max_bytes])
            del self._buf[:max_bytes]
            return data
        return self.socket.recv(max_bytes)

    def receive_line(self, max_bytes: int = _DEFAULT_MAX) -> bytes:
        """The next line, b"\\n" included; at the end of the stream what is
        left (without b"\\n"), then b"".  ValueError when no b"\\n" comes
        within max_bytes (the bytes stay to be received)."""
        start = 0
        while True:
            end = self._buf.find(b"\n", start)
            if end >= 0:
                if end + 1 > max_bytes:
                    break
                line = bytes(self._buf[:end + 1])
                del self._buf[:end + 1]
                return line
            if len(self._buf) >= max_bytes:
                break
            start = len(self._buf)
            data = self.socket.recv(_DEFAULT_MAX)
            if not data:
                line = bytes(self._buf)
                self._buf.clear()
                return line
            self._buf += data
        raise ValueError(f"receive_line: no end of line within {max_bytes} bytes")

    def send_all(self, data: Any) -> None:
        """Sends every byte of data (bytes, bytearray, memoryview)."""
        self.socket.sendall(data)

    def send_eof(self) -> None:
        """Shuts the sending half: the peer reads b"" after what was sent."""
        self.socket.shutdown(_std.SHUT_WR)

    def close(self) -> None:
        """Closes the socket, waking any fiber waiting on it."""
        self.socket.close()

    def __enter__(self) -> "SocketStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<parataxis.SocketStream fd={self.socket.fileno()}>"


SocketStream.__module__ = "parataxis"


def open_tcp_stream(host: Any, port: int, *, timeout: Optional[float] = None) -> SocketStream:
    """A SocketStream connected to (host, port): the name is looked up on
    the blocking pool, each address tried in turn (create_connection), and
    TCP_NODELAY set, as a stream of requests and answers wants.  `timeout`
    bounds the connect (TimeoutError); the stream itself has none."""
    sock = create_connection((host, port), timeout=timeout)
    sock.settimeout(None)
    sock.setsockopt(_std.IPPROTO_TCP, _std.TCP_NODELAY, 1)
    return SocketStream(sock)


def _serve_one(handler: Callable[[SocketStream], Any], conn: socket, token: CancellationToken,
               live: Dict[int, Fiber[Any]]) -> None:
    try:
        with conn, cancel_scope(token):
            handler(SocketStream(conn))
    except (Cancelled, ClosedResourceError):
        pass      # the server stopped
    except Exception:
        # One connection's failure ends that connection, as socketserver's
        # and gevent's servers do; the server goes on.
        print("parataxis.serve_tcp: a handler raised:", file=sys.stderr)
        traceback.print_exc()
    finally:
        live.pop(current_id(), None)


def serve_tcp(handler: Callable[[SocketStream], Any], port: int, host: Optional[str] = None,
              *, backlog: int = 128, ready: Optional[Callable[[socket], Any]] = None) -> None:
    """Listens on (host, port) -- host None: every address; port 0: one the
    kernel picks -- and runs handler(stream) in a new fiber for each
    connection, the stream closed when the handler returns.  Runs until it is
    stopped: by a scope around it (a timeout, a cancel token), or by closing
    the listener, which ready(listener) receives once it listens (its
    getsockname() gives the port).

    Stopping cancels every handler: each wait in one raises Cancelled, its
    finally blocks run, and the connection is closed.  serve_tcp waits for
    them to end, unless its own scope fired (a fired scope ends every later
    wait at once): then they end on their own, before px.run returns.  A
    handler that raises ends its connection only: the traceback goes to
    stderr and the server goes on."""
    listener = create_server((host or "", port), backlog=backlog,
                             family=_std.AF_INET6 if host and ":" in host else _std.AF_INET)
    token = CancellationToken()
    live: Dict[int, Fiber[Any]] = {}
    try:
        if ready is not None:
            ready(listener)
        while True:
            try:
                conn, _ = listener.accept()
            except ClosedResourceError:
                return         # the listener was closed: stop
            except OSError as e:
                if e.errno in _OUT_OF_RESOURCES:
                    sleep(0.1)     # until a connection ends (asyncio, trio alike)
                    continue
                if e.errno in _TRANSIENT:
                    continue
                raise
            f = spawn(_serve_one, handler, conn, token, live)
            live[f.id] = f
    finally:
        listener.close()
        token.cancel()
        try:
            for f in list(live.values()):
                f.join()
        except Error:
            pass               # our own scope fired: they end on their own


# accept() errors of one connection, not of the listener; and those of a
# process out of fds or memory, which the next accept would repeat at once.
_TRANSIENT = {errno.ECONNABORTED, errno.EPROTO, errno.EPERM}
_OUT_OF_RESOURCES = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}
