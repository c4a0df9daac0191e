"""TLS on fiber sockets: px.wrap_socket over the standard ssl module.

Every test runs a server and its clients as fibers of one px.run, on
127.0.0.1, with a certificate for "localhost" that the session makes with the
openssl command.  Each run is bounded (px.timeout) so that a lost wake fails
the test instead of hanging it."""
import errno
import os
import random
import shutil
import socket
import ssl
import subprocess
import threading

import pytest

import parataxis as px

pytestmark = pytest.mark.group("io")   # tests/behaviours.txt: io.<name>

BOUND = 30.0   # seconds a whole run may take: a 2-core noisy VM


@pytest.fixture(scope="session")
def cert(tmp_path_factory):
    """(certificate, key) files of a self-signed certificate for localhost."""
    if shutil.which("openssl") is None:
        pytest.skip("no openssl command (.ci/deps installs it)")
    d = tmp_path_factory.mktemp("tls")
    c, k = d / "c.pem", d / "k.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                    "-keyout", str(k), "-out", str(c), "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost"],
                   check=True, capture_output=True, timeout=120)
    return str(c), str(k)


@pytest.fixture
def server_ctx(cert):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(*cert)
    return ctx


@pytest.fixture
def client_ctx(cert):
    return ssl.create_default_context(cafile=cert[0])


def listener():
    """A listening px.socket on a free port of 127.0.0.1."""
    return px.create_server(("127.0.0.1", 0), backlog=256)


def accept(lsock):
    """The next connection to `lsock`, a px.socket."""
    return lsock.accept()[0]


def connect(port):
    """A px.socket connected to 127.0.0.1:port."""
    return px.create_connection(("127.0.0.1", port))


def pair(server_ctx, client_ctx, **client_kw):
    """A (server, client) pair of TLS sockets, handshakes done, in the run."""
    with listener() as lsock:
        port = lsock.getsockname()[1]
        server = px.spawn(lambda: px.wrap_socket(server_ctx, accept(lsock), server_side=True))
        client = px.wrap_socket(client_ctx, connect(port), server_hostname="localhost",
                                **client_kw)
        return server.join(), client


def bounded(main):
    """px.run(main) within BOUND seconds."""
    def run():
        with px.timeout(BOUND):
            return main()
    return px.run(run)


def recv_exactly(tls, n):
    out = bytearray()
    while len(out) < n:
        got = tls.recv(min(n - len(out), 1 << 16))
        assert got, f"EOF after {len(out)} of {n} bytes"
        out += got
    return bytes(out)


def test_tls_echo_of_many_client_fibers_checks_every_byte(server_ctx, client_ctx):
    clients, rounds = 50, 8

    def handler(conn):
        with px.wrap_socket(server_ctx, conn, server_side=True) as tls:
            while True:
                data = tls.recv(1 << 16)
                if not data:
                    return
                tls.sendall(data)

    def serve(lsock):
        handlers = [px.spawn(handler, accept(lsock)) for _ in range(clients)]
        for h in handlers:
            h.join()

    def client(port, seed):
        rng = random.Random(seed)
        with px.wrap_socket(client_ctx, connect(port), server_hostname="localhost") as tls:
            assert tls.server_hostname == "localhost"
            assert tls.version() in ("TLSv1.2", "TLSv1.3")
            assert tls.cipher() is not None
            assert dict(x[0] for x in tls.getpeercert()["subject"])["commonName"] == "localhost"
            for _ in range(rounds):
                msg = rng.randbytes(rng.randint(1, 40000))
                tls.sendall(msg)
                assert recv_exactly(tls, len(msg)) == msg
        return rounds

    def main():
        with listener() as lsock:
            server = px.spawn(serve, lsock)
            port = lsock.getsockname()[1]
            fibers = [px.spawn(client, port, seed) for seed in range(clients)]
            assert [f.join() for f in fibers] == [rounds] * clients
            server.join()

    bounded(main)


def test_tls_the_servers_sni_callback_sees_the_name_the_client_gave(server_ctx, client_ctx):
    seen = []
    server_ctx.sni_callback = lambda sslobj, name, ctx: seen.append(name)

    def main():
        server, client = pair(server_ctx, client_ctx)
        with server, client:
            client.sendall(b"hello")
            assert server.recv(5) == b"hello"

    bounded(main)
    assert seen == ["localhost"]


def test_tls_a_wrong_hostname_fails_the_handshake_with_a_verification_error(
        server_ctx, client_ctx):
    def server_side(lsock):
        conn = accept(lsock)
        with pytest.raises(ssl.SSLError):
            px.wrap_socket(server_ctx, conn, server_side=True).close()
        assert conn.fileno() == -1        # taken over, and closed by the failure

    def main():
        with listener() as lsock:
            server = px.spawn(server_side, lsock)
            raw = connect(lsock.getsockname()[1])
            with pytest.raises(ssl.SSLCertVerificationError) as e:
                px.wrap_socket(client_ctx, raw, server_hostname="not-localhost")
            assert "not-localhost" in str(e.value)
            assert raw.fileno() == -1     # taken over, and closed by the failure
            server.join()

    bounded(main)


def test_tls_unwrap_goes_back_to_plain_text_on_the_same_connection(server_ctx, client_ctx):
    def main():
        server, client = pair(server_ctx, client_ctx)
        client.sendall(b"secret")
        assert server.recv(6) == b"secret"
        unwrapped = px.spawn(server.unwrap)
        plain_c = client.unwrap()
        plain_s = unwrapped.join()
        assert client.fileno() == -1 and server.fileno() == -1
        with plain_c, plain_s:
            assert isinstance(plain_c, px.socket) and isinstance(plain_s, px.socket)
            plain_c.sendall(b"in clear")
            assert plain_s.recv(100) == b"in clear"
            plain_s.sendall(b"back")
            assert plain_c.recv(100) == b"back"

    bounded(main)


def test_tls_a_scope_ends_a_recv_cleanly_and_the_connection_goes_on(server_ctx, client_ctx):
    def main():
        server, client = pair(server_ctx, client_ctx)
        with server, client:
            with px.move_on_after(0.05) as scope:
                client.recv(100)
            assert scope.expired
            with pytest.raises(px.Timeout):
                with px.timeout(0.02):
                    client.recv(100)
            server.sendall(b"late but whole")
            assert recv_exactly(client, 14) == b"late but whole"
            client.sendall(b"and back")
            assert recv_exactly(server, 8) == b"and back"

    bounded(main)


def test_tls_settimeout_bounds_each_call_with_timeouterror(server_ctx, client_ctx):
    def main():
        server, client = pair(server_ctx, client_ctx)
        with server, client:
            client.settimeout(0.05)
            assert client.gettimeout() == 0.05
            t0 = px.now()
            with pytest.raises(TimeoutError, match="timed out") as e:
                client.recv(100)
            assert not isinstance(e.value, px.Timeout)   # the socket's, not a scope's
            assert px.now() - t0 >= 0.05
            client.settimeout(0.0)
            with pytest.raises(ssl.SSLWantReadError):
                client.recv(100)
            client.settimeout(None)
            server.sendall(b"x")
            assert client.recv(100) == b"x"

    bounded(main)


def test_tls_sendall_timeout_bounds_the_whole_call(server_ctx, client_ctx):
    def main():
        server, client = pair(server_ctx, client_ctx)
        with server, client:
            done = []

            def trickle():   # drains a record now and then: no one wait is long
                server.settimeout(0.05)
                while not done:
                    px.sleep(0.02)
                    try:
                        server.recv(16384)
                    except TimeoutError:
                        pass
            f = px.spawn(trickle)
            client.settimeout(0.3)
            t0 = px.now()
            with pytest.raises(TimeoutError, match="timed out"):
                client.sendall(b"x" * (16 << 20))   # ~20 s at the trickle's pace
            took = px.now() - t0
            done.append(True)
            f.join()
            assert 0.3 <= took < 5, took

    bounded(main)


def test_tls_close_wakes_a_fiber_waiting_in_recv_with_closedresourceerror(
        server_ctx, client_ctx):
    def main():
        server, client = pair(server_ctx, client_ctx)
        with server:
            def reader():
                with pytest.raises(px.ClosedResourceError) as e:
                    client.recv(100)
                return e.value
            f = px.spawn(reader)
            px.sleep(0.02)
            client.close()
            err = f.join()
            assert isinstance(err, OSError) and err.errno == errno.EBADF
            with pytest.raises(px.ClosedResourceError):
                client.recv(100)
            assert client.fileno() == -1

    bounded(main)


def test_tls_a_second_receiving_fiber_gets_busyerror(server_ctx, client_ctx):
    def main():
        server, client = pair(server_ctx, client_ctx)
        with server, client:
            first = px.spawn(client.recv, 100)
            px.sleep(0.01)
            with pytest.raises(px.BusyError):
                client.recv(100)
            server.sendall(b"for the first")
            assert first.join() == b"for the first"

    bounded(main)


def test_tls_a_big_sendall_both_ways_at_once(server_ctx, client_ctx):
    size = 6 << 20
    up, down = os.urandom(size), os.urandom(size)

    def side(tls, out, expect):
        sender = px.spawn(tls.sendall, out)
        got = recv_exactly(tls, len(expect))
        sender.join()
        return got == expect

    def main():
        server, client = pair(server_ctx, client_ctx)
        with server, client:
            s = px.spawn(side, server, down, up)
            assert side(client, up, down)
            assert s.join()

    bounded(main)


def test_tls_makefile_reads_lines(server_ctx, client_ctx):
    def main():
        server, client = pair(server_ctx, client_ctx)
        with server:
            f = client.makefile("rwb")
            client.close()               # the file keeps the connection open
            f.write(b"ping\n")
            f.flush()
            assert recv_exactly(server, 5) == b"ping\n"
            server.sendall(b"one\ntwo\n")
            assert f.readline() == b"one\n"
            assert f.readline() == b"two\n"
            f.close()
            assert client.fileno() == -1

    bounded(main)


def test_tls_a_plain_socket_is_made_non_blocking_and_parks_only_its_fiber(
        server_ctx, client_ctx):
    def main():
        with listener() as lsock:
            port = lsock.getsockname()[1]
            server = px.spawn(lambda: px.wrap_socket(server_ctx, accept(lsock),
                                                     server_side=True))
            raw = socket.create_connection(("127.0.0.1", port))   # blocking, standard
            assert raw.gettimeout() is None
            client = px.wrap_socket(client_ctx, raw, server_hostname="localhost")
            assert client.gettimeout() is None
            with server.join() as tls_s, client:
                ticks = []

                def ticker():
                    for i in range(3):
                        px.sleep(0.01)
                        ticks.append(i)
                    tls_s.sendall(b"after the ticks")
                px.spawn(ticker)
                assert recv_exactly(client, 15) == b"after the ticks"
                assert ticks == [0, 1, 2]

    bounded(main)


def test_tls_off_fiber_the_calls_wait_on_the_thread(server_ctx, client_ctx):
    """Outside px.run the socket blocks the thread, as a px.socket does."""
    with socket.create_server(("127.0.0.1", 0)) as lsock:

        def server():
            conn, _ = lsock.accept()
            with server_ctx.wrap_socket(conn, server_side=True) as tls:
                tls.sendall(tls.recv(100).upper())

        t = threading.Thread(target=server)
        t.start()
        try:
            raw = socket.create_connection(lsock.getsockname())
            with px.wrap_socket(client_ctx, raw, server_hostname="localhost") as tls:
                tls.settimeout(0.05)
                with pytest.raises(TimeoutError, match="timed out"):
                    tls.recv(100)
                tls.settimeout(BOUND)
                tls.sendall(b"off fiber")
                assert recv_exactly(tls, 9) == b"OFF FIBER"
        finally:
            t.join(BOUND)


class _OwesAWrite:
    """Stands for the standard SSLSocket inside a px.SSLSocket: its recv must
    first write (TLS owes the peer a record: SSLWantWriteError), and its send
    wants room in the socket."""

    def __init__(self, sock):
        self.sock, self.owed = sock, True

    def fileno(self):
        return self.sock.fileno()

    def recv(self, n, flags=0):
        if self.owed:
            raise ssl.SSLWantWriteError()
        return b"r"

    def send(self, data, flags=0):
        try:
            sent = self.sock.send(data)
        except BlockingIOError:
            raise ssl.SSLWantWriteError() from None
        self.owed = False
        return sent

    def close(self):
        self.sock.close()


def test_tls_a_recv_that_must_write_waits_beside_a_parked_sender():
    """The fd admits one writability waiter: a recv whose TLS must write while
    a sendall waits for room shares that wait instead of raising BusyError."""
    a, b = socket.socketpair()
    a.setblocking(False)
    b.setblocking(False)
    try:
        while True:
            a.send(b"\0" * 65536)
    except BlockingIOError:
        pass

    def main():
        tls = px.SSLSocket(_OwesAWrite(a), None)
        with tls:
            sender = px.spawn(tls.send, b"s")
            receiver = px.spawn(tls.recv, 1)
            px.sleep(0.02)
            assert not sender.done and not receiver.done
            try:
                while b.recv(1 << 16):
                    pass
            except BlockingIOError:
                pass
            assert sender.join() == 1
            assert receiver.join() == b"r"

    try:
        bounded(main)
    finally:
        b.close()


def test_tls_wrap_socket_refuses_an_unconnected_or_non_blocking_socket_and_leaves_it_open(
        client_ctx):
    def main():
        with px.socket() as unconnected:
            with pytest.raises(OSError) as e:
                px.wrap_socket(client_ctx, unconnected, server_hostname="localhost")
            assert e.value.errno == errno.ENOTCONN
            assert unconnected.fileno() != -1
        with listener() as lsock, connect(lsock.getsockname()[1]) as sock:
            sock.settimeout(0)
            with pytest.raises(ValueError, match="non-blocking"):
                px.wrap_socket(client_ctx, sock, server_hostname="localhost")
            assert sock.fileno() != -1

    bounded(main)
