"""Fibers that do I/O, as tests/c/io does from C: test_<behaviour> is the C spec
of the same name where one exists (tests/behaviours.txt, group io); the rest
is what only the Python socket, streams and pool have.  Every wait is synced on
events or on yields, never on sleeps, and every run is bounded by a timeout
scope (sync_kit.run), so a lost wake-up fails instead of hanging."""
import errno
import gc
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref

import pytest

import parataxis as px
from parataxis._parataxis import lib
from sync_kit import TIMEOUT, run, settle, until

pytestmark = pytest.mark.group("io")   # tests/behaviours.txt: io.<name>


def pair():
    """A connected pair of parataxis sockets (AF_UNIX)."""
    a, b = socket.socketpair()
    return px.socket.from_socket(a), px.socket.from_socket(b)


def tcp_pair(listener):
    """A connected client and server parataxis TCP socket on `listener`."""
    c = px.create_connection(listener.getsockname())
    s, _ = listener.accept()
    return c, s


def fill(sock):
    """Writes into sock until it has no room; returns the count written."""
    n = 0
    chunk = b"x" * 65536
    while True:
        try:
            n += socket.socket.send(sock, chunk, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return n


def drain(sock):
    """Reads sock until it has nothing; returns the bytes read."""
    out = bytearray()
    while True:
        try:
            data = socket.socket.recv(sock, 65536, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return bytes(out)
        if not data:
            return bytes(out)
        out += data


# -- the waits ------------------------------------------------------------------

def test_wait_fd_wakes_a_reader_when_data_comes():
    a, b = pair()
    with a, b:
        def body():
            got = []
            f = px.spawn(lambda: (px.wait_readable(a), got.append(a.recv(10))))
            settle()
            assert got == []
            b.send(b"hi")
            f.join()
            assert got == [b"hi"]
        run(body)


def test_wait_fd_wakes_a_writer_when_there_is_room():
    a, b = pair()
    with a, b:
        def body():
            fill(a)
            woke = []
            f = px.spawn(lambda: (px.wait_writable(a), woke.append(True)))
            settle()
            assert woke == []
            drain(b)
            f.join()
            assert woke == [True]
        run(body)


def test_read_waits_for_data_and_returns_what_is_there():
    a, b = pair()
    with a, b:
        def body():
            f = px.spawn(a.recv, 100)
            settle()
            b.sendall(b"abc")
            assert f.join() == b"abc"          # what is there, not 100 bytes
            buf = bytearray(10)
            g = px.spawn(a.recv_into, buf)
            settle()
            b.sendall(b"xyz")
            assert g.join() == 3 and buf[:3] == b"xyz"
        run(body)


def test_a_second_waiter_in_the_same_direction_is_ebusy():
    a, b = pair()
    with a, b:
        def body():
            first = px.spawn(px.wait_readable, a)
            settle()
            with pytest.raises(px.BusyError):
                px.wait_readable(a)
            fill(a)
            writer = px.spawn(px.wait_writable, a)   # the other direction: allowed
            settle()
            b.send(b"x")
            first.join()
            drain(b)
            writer.join()
        run(body)


def test_a_second_reader_of_one_fd_gets_ebusy():
    a, b = pair()
    with a, b:
        def body():
            first = px.spawn(a.recv, 10)
            settle()
            with pytest.raises(px.BusyError):
                a.recv(10)
            b.send(b"x")
            assert first.join() == b"x"
        run(body)


def test_a_scope_ends_a_wait_and_leaves_nothing_registered():
    a, b = pair()
    with a, b:
        def body():
            with px.move_on_after(0.01) as scope:
                px.wait_readable(a)
            assert scope.expired
            f = px.spawn(a.recv, 10)          # no EBUSY: the wait left nothing
            settle()
            b.send(b"y")
            assert f.join() == b"y"
        run(body)


def test_a_closed_fd_of_any_number_is_einval():
    def body():
        r, w = os.pipe()
        os.close(r)
        os.close(w)
        for fd in (r, -1, 1 << 30):
            with pytest.raises(px.InvalidArgument):
                px.wait_readable(fd)
    run(body)


def test_a_regular_file_is_enotsup_and_a_bad_fd_einval(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"data")
    with open(path, "rb") as f:
        def body():
            with pytest.raises(px.NotSupportedError):
                px.wait_readable(f)
            with pytest.raises(px.NotSupportedError):
                px.wait_writable(f.fileno())
            with pytest.raises(px.InvalidArgument):
                px.wait_readable(-5)
            with pytest.raises(TypeError):
                px.wait_readable("not an fd")
        run(body)


def test_a_pipes_hangup_wakes_its_reader():
    r, w = os.pipe()
    os.set_blocking(r, False)
    try:
        def body():
            f = px.spawn(px.wait_readable, r)
            settle()
            px.notify_closing(w)
            os.close(w)
            f.join()
        run(body)
    finally:
        os.close(r)


def test_a_pipes_hangup_ends_px_read_with_0():
    a, b = pair()
    with a:
        def body():
            f = px.spawn(a.recv, 10)
            settle()
            b.close()
            assert f.join() == b""
        run(body)


def test_a_reused_fd_number_gets_no_stale_wake():
    r, w = os.pipe()
    try:
        def body():
            f = px.spawn(px.wait_readable, r)
            settle()
            px.notify_closing(r)
            with pytest.raises(px.ClosedResourceError):
                f.join()
            keep = os.dup(r)                  # the old pipe lives on
            os.close(r)
            r2, w2 = os.pipe()                # likely the same number
            try:
                g = px.spawn(px.wait_readable, r2)
                settle()
                os.write(w, b"old")           # the old pipe's writer: wakes nobody
                settle()
                assert not g.done
                os.write(w2, b"new")
                g.join()
            finally:
                os.close(r2)
                os.close(w2)
                os.close(keep)
        run(body)
    finally:
        os.close(w)


def test_a_reused_fd_number_is_not_woken_by_the_old_files_events():
    a, b = pair()
    fd = a.fileno()
    def body():
        f = px.spawn(a.recv, 10)
        settle()
        keep = os.dup(fd)                        # the old socket lives on
        a.close()                                # notify_closing, then close
        with pytest.raises(px.ClosedResourceError):
            f.join()
        r, w = os.pipe()
        if r != fd:                              # the number, now another file's
            os.dup2(r, fd)
            os.close(r)
        try:
            g = px.spawn(px.wait_readable, fd)
            settle()
            b.send(b"to the old socket")         # its events are gone with it
            settle()
            assert not g.done
            os.write(w, b"z")
            g.join()
        finally:
            px.notify_closing(fd)
            os.close(fd)
            os.close(w)
            os.close(keep)
    run(body)
    b.close()


def test_a_busy_run_does_not_starve_io():
    a, b = pair()
    with a, b:
        def body():
            got = []
            reader = px.spawn(lambda: got.append(a.recv(10)))
            settle()
            b.send(b"go")
            until(lambda: got, "the reader's turn")   # never parks: yields only
            reader.join()
        run(body)


def test_a_stray_wake_does_not_end_an_fd_wait():
    a, b = pair()
    with a, b:
        def body():
            f = px.spawn(a.recv, 10)
            settle()
            assert lib.px_wake(f.id) == 1      # a wake that is not the fd's
            settle()
            assert not f.done                  # parked again
            b.send(b"q")
            assert f.join() == b"q"
        run(body)


def test_an_fd_waiter_is_not_a_deadlock():
    a, b = pair()
    with a, b:
        t = threading.Timer(0.05, lambda: socket.socket.send(b, b"late"))
        t.start()
        try:
            assert run(a.recv, 10) == b"late"   # alone, parked on the fd: no DeadlockError
        finally:
            t.join()


def test_a_signal_ends_a_pulled_runs_fd_wait_with_eintr_and_the_wait_goes_on():
    a, b = pair()
    seen = []
    old = signal.signal(signal.SIGUSR1, lambda *_: seen.append(1))
    try:
        with a, b:
            def kill_then_send():
                os.kill(os.getpid(), signal.SIGUSR1)
                time.sleep(0.05)
                socket.socket.send(b, b"after")
            t = threading.Thread(target=kill_then_send)
            t.start()
            try:
                assert run(a.recv, 10) == b"after"   # the handler ran; the wait went on
            finally:
                t.join()
            assert seen == [1]
    finally:
        signal.signal(signal.SIGUSR1, old)


# -- notify_closing -------------------------------------------------------------

def test_notify_closing_ends_px_read_with_ebadf():
    a, b = pair()
    with b:
        def body():
            f = px.spawn(a.recv, 10)
            settle()
            a.close()
            with pytest.raises(px.ClosedResourceError) as e:
                f.join()
            assert e.value.errno == errno.EBADF and isinstance(e.value, OSError)
            assert isinstance(e.value, px.Closed)
        run(body)


def test_notify_closing_wakes_every_waiter_with_eclosed():
    a, b = pair()
    with b:
        def body():
            fill(a)
            reader = px.spawn(px.wait_readable, a)
            writer = px.spawn(px.wait_writable, a)
            settle()
            px.notify_closing(a)
            for f in (reader, writer):
                with pytest.raises(px.ClosedResourceError):
                    f.join()
            a.close()
        run(body)


def test_notify_closing_from_another_thread_wakes_the_waiter():
    a, b = pair()
    with a, b:
        def body():
            f = px.spawn(px.wait_readable, a)
            settle()
            t = threading.Thread(target=px.notify_closing, args=(a,))
            t.start()
            with pytest.raises(px.ClosedResourceError):
                f.join()
            t.join()
        run(body)


def test_notify_closing_from_another_thread_ends_px_recv_with_ebadf():
    a, b = pair()
    with b:
        def body():
            f = px.spawn(a.recv, 10)
            settle()
            t = threading.Thread(target=a.close)
            t.start()
            with pytest.raises(px.ClosedResourceError):
                f.join()
            t.join()
        run(body)


def test_notify_closing_wakes_the_waiters_of_every_scheduler():
    a, b = pair()
    with a, b:
        fill(a)
        waiting = threading.Barrier(2, timeout=TIMEOUT)
        out = []

        def other_run():
            def main():
                f = px.spawn(px.wait_writable, a)
                settle()
                waiting.wait()
                try:
                    f.join()
                except px.ClosedResourceError:
                    out.append("writer closed")
            run(main)
        t = threading.Thread(target=other_run)
        t.start()

        def body():
            f = px.spawn(px.wait_readable, a)
            settle()
            waiting.wait()
            px.notify_closing(a)
            with pytest.raises(px.ClosedResourceError):
                f.join()
        run(body)
        t.join(TIMEOUT)
        assert out == ["writer closed"]


def test_waiters_of_two_schedulers_on_one_fd_are_both_woken_by_its_event():
    a, b = pair()
    with a, b:
        waiting = threading.Barrier(3, timeout=TIMEOUT)
        woke = []

        def one_run():
            def main():
                f = px.spawn(px.wait_readable, a)
                settle()
                waiting.wait()
                f.join()
                woke.append(1)
            run(main)
        threads = [threading.Thread(target=one_run) for _ in range(2)]
        for t in threads:
            t.start()
        waiting.wait()
        socket.socket.send(b, b"!")
        for t in threads:
            t.join(TIMEOUT)
        assert woke == [1, 1]


def test_notify_closing_in_a_fork_child_leaves_the_parent_alone():
    a, b = pair()
    with a, b:
        def body():
            f = px.spawn(a.recv, 10)
            settle()
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    px.notify_closing(a)       # the parent's waiter is not woken
                    code = 0
                finally:
                    os._exit(code)
            _, status = os.waitpid(pid, 0)
            assert os.WEXITSTATUS(status) == 0
            settle()
            assert not f.done
            b.send(b"still here")
            assert f.join() == b"still here"
        run(body)


def test_a_fork_childs_new_scheduler_waits_on_fds_and_leaves_the_parents_set_alone():
    a, b = pair()
    with a, b:
        def body():
            f = px.spawn(a.recv, 10)
            settle()
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    c, d = pair()
                    d.send(b"child")
                    # A run of the child's own: its fd waits work.
                    r = []
                    t = threading.Thread(target=lambda: r.append(px.run(c.recv, 10)))
                    t.start()
                    t.join(TIMEOUT)
                    code = 0 if r == [b"child"] else 2
                finally:
                    os._exit(code)
            _, status = os.waitpid(pid, 0)
            assert os.WEXITSTATUS(status) == 0
            b.send(b"parent")
            assert f.join() == b"parent"
        run(body)


# -- the calls ------------------------------------------------------------------

def test_off_fiber_the_calls_wait_on_the_thread():
    a, b = pair()
    with a, b:
        t = threading.Timer(0.05, lambda: socket.socket.send(b, b"blocking"))
        t.start()
        assert a.recv(20) == b"blocking"        # no run: the thread waits
        t.join()
        a.settimeout(0.02)
        with pytest.raises(TimeoutError):
            a.recv(1)
        a.setblocking(False)
        with pytest.raises(BlockingIOError):
            a.recv(1)
        with pytest.raises(px.NoFiberError):
            px.wait_readable(a)


def test_a_scope_ending_px_recv_loses_no_byte():
    a, b = pair()
    sent = bytes(range(256)) * 64

    def feed():            # small bursts, while the reader's scopes keep firing
        for k in range(0, len(sent), 97):
            socket.socket.sendall(b, sent[k:k + 97])
            time.sleep(0.002 if k % 970 == 0 else 0.0002)
    t = threading.Thread(target=feed)
    with a, b:
        def reader():
            got = bytearray()
            expired = 0
            t.start()
            while len(got) < len(sent):
                with px.move_on_after(0.0005) as scope:
                    got += a.recv(1000)
                expired += scope.expired
            return bytes(got), expired
        got, expired = run(reader)
        t.join()
        assert got == sent
        assert expired > 0


def test_a_scope_ending_px_write_returns_the_count_written():
    a, b = pair()
    with a, b:
        data = os.urandom(4 << 20)

        def body():
            with pytest.raises(px.Timeout):
                with px.timeout(0.05):
                    a.sendall(data)           # nobody reads: the scope ends it
            a.shutdown(socket.SHUT_WR)
            got = bytearray()
            while True:
                chunk = b.recv(1 << 16)
                if not chunk:
                    break
                got += chunk
            # What the reader gets is exactly a prefix: no byte twice, none lost
            # in the middle.
            assert 0 < len(got) < len(data) and data.startswith(got)
            with pytest.raises(px.Timeout):   # send(): the same, one call
                with px.timeout(0.01):
                    b.send(b"x")
                    fill(b)
                    b.send(b"y")
        run(body)


def test_px_accept_waits_for_a_connection():
    with px.create_server(("127.0.0.1", 0)) as lst:
        def body():
            f = px.spawn(lst.accept)
            settle()
            assert not f.done
            c = px.create_connection(lst.getsockname())
            s, addr = f.join()
            assert isinstance(s, px.socket) and addr == c.getsockname()
            assert not os.get_blocking(s.fileno()) and s.gettimeout() is None
            s.close()
            c.close()
        run(body)


def test_px_connect_and_px_accept_make_a_connection_or_say_why_not():
    with px.create_server(("127.0.0.1", 0)) as lst:
        port = lst.getsockname()[1]

        def body():
            c, s = tcp_pair(lst)
            with c, s:
                c.sendall(b"ping")
                assert s.recv(4) == b"ping"
            lst.close()
            with pytest.raises(ConnectionRefusedError):
                px.create_connection(("127.0.0.1", port))
            sock = px.socket()
            with sock:
                assert sock.connect_ex(("127.0.0.1", port)) == errno.ECONNREFUSED
        run(body)


def test_a_scope_ending_px_connect_leaves_the_socket_to_close():
    # A listener whose backlog is full leaves a TCP connect in SYN_SENT.
    with px.create_server(("127.0.0.1", 0), backlog=0) as lst:
        def body():
            held = []
            try:
                for _ in range(16):
                    s = px.socket()
                    held.append(s)
                    with px.move_on_after(0.05) as scope:
                        s.connect(lst.getsockname())
                    if scope.expired:
                        break
                else:
                    pytest.skip("the kernel accepted every connection: no full backlog here")
                assert held[-1].fileno() >= 0     # left connecting: ours to close
            finally:
                for s in held:
                    s.close()
        run(body)


def test_px_recv_after_a_reset_is_econnreset():
    with px.create_server(("127.0.0.1", 0)) as lst:
        def body():
            c, s = tcp_pair(lst)
            with c, s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
                f = px.spawn(c.recv, 10)
                settle()
                s.close()                        # linger 0: a reset
                with pytest.raises(ConnectionResetError):
                    f.join()
        run(body)


def test_px_send_to_a_gone_peer_is_epipe_not_sigpipe():
    a, b = pair()
    with a:
        b.close()
        def body():
            with pytest.raises(BrokenPipeError):
                a.sendall(b"x")
        run(body)


# -- many -----------------------------------------------------------------------

def test_echo_of_200_clients_on_own_stacks_checks_every_byte():
    with px.create_server(("127.0.0.1", 0), backlog=256) as lst:
        def echo(conn):
            buf = bytearray(4096)
            with conn:
                while True:
                    n = conn.recv_into(buf)
                    if n == 0:
                        return
                    conn.sendall(memoryview(buf)[:n])

        def server():
            while True:
                conn, _ = lst.accept()
                px.spawn(echo, conn)

        def client(i):
            with px.create_connection(lst.getsockname()) as s:
                for k in range(20):
                    msg = bytes((i * 31 + k + j) % 256 for j in range(1000 + 37 * k))
                    s.sendall(msg)
                    got = bytearray()
                    while len(got) < len(msg):
                        got += s.recv(65536)
                    assert got == msg
            return i

        def body():
            srv = px.spawn(server)
            clients = [px.spawn(client, i) for i in range(200)]
            assert sorted(f.join() for f in clients) == list(range(200))
            lst.close()
            with pytest.raises(px.ClosedResourceError):
                srv.join()
        run(body)


HOLDER = """
import resource, socket, sys
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
socks = [socket.create_connection(("127.0.0.1", int(sys.argv[1])))
         for _ in range(int(sys.argv[2]))]
print("connected", flush=True)
sys.stdin.readline()
for s in socks:
    s.send(b"!")
sys.stdin.readline()
"""


def test_ten_thousand_fibers_parked_on_sockets_are_released():
    n = 10000
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < n + 256:
        pytest.skip(f"RLIMIT_NOFILE hard limit {hard} < {n + 256}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, n + 256), hard))
    conns = []
    try:
        with px.create_server(("127.0.0.1", 0), backlog=1024) as lst:
            # The client ends live in another process: each holds 10,000 fds.
            holder = subprocess.Popen([sys.executable, "-c", HOLDER,
                                       str(lst.getsockname()[1]), str(n)],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE)

            def body():
                while len(conns) < n:
                    conns.append(lst.accept()[0])
                px.wait_readable(holder.stdout)
                assert holder.stdout.readline() == b"connected\n"
                fibers = [px.spawn(c.recv, 1) for c in conns]
                settle(3)
                assert not any(f.done for f in fibers)
                holder.stdin.write(b"send\n")
                holder.stdin.flush()
                assert all(f.join() == b"!" for f in fibers)
            try:
                run(body)
            finally:
                holder.stdin.close()
                holder.stdout.close()
                holder.wait(TIMEOUT)
    finally:
        for c in conns:
            c.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


# -- the socket -----------------------------------------------------------------

def test_a_socket_keeps_the_standard_sockets_timeout_rules():
    a, b = pair()
    with a, b:
        assert a.gettimeout() is None and a.getblocking() and a.timeout is None
        def body():
            a.settimeout(0.02)
            assert a.gettimeout() == 0.02
            t0 = time.monotonic()
            with pytest.raises(TimeoutError) as e:
                a.recv(1)
            assert time.monotonic() - t0 >= 0.02
            assert type(e.value) is TimeoutError and str(e.value) == "timed out"
            a.setblocking(False)
            assert a.gettimeout() == 0.0 and not a.getblocking()
            with pytest.raises(BlockingIOError):
                a.recv(1)
            with pytest.raises(ValueError):
                a.settimeout(-1)
            with pytest.raises(TypeError):
                a.settimeout("1")
            a.settimeout(None)
            b.send(b"1")
            assert a.recv(1) == b"1"
            assert not os.get_blocking(a.fileno())     # the fd never blocks
            # The socket's own timeout ends only its call, as TimeoutError;
            # a scope's is px.Timeout.
            a.settimeout(5)
            with pytest.raises(px.Timeout):
                with px.timeout(0.01):
                    a.recv(1)
        run(body)


def test_a_tiny_positive_timeout_is_a_timeout_not_non_blocking():
    # The standard socket rounds a timeout up to its clock's unit: 1e-10 s
    # stays a timeout (TimeoutError), it never turns the socket non-blocking.
    a, b = pair()
    with a, b:
        a.settimeout(1e-10)
        assert a.getblocking() and a.gettimeout() > 0
        def body():
            with pytest.raises(TimeoutError):
                a.recv(1)
        run(body)
        with pytest.raises(TimeoutError):
            a.recv(1)


def test_off_fiber_waits_take_fds_above_select_s_limit():
    # Off-fiber, accept, recvfrom and connect wait on the thread: an fd
    # number past FD_SETSIZE (1024) must wait as any other, as the standard
    # socket's poll(2) does.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 2048:
        pytest.skip("RLIMIT_NOFILE below 2048")
    if soft != resource.RLIM_INFINITY and soft < 2048:
        resource.setrlimit(resource.RLIMIT_NOFILE, (2048, hard))
    try:
        raw = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        fd = os.dup2(raw.fileno(), 2000, inheritable=False)
        raw.close()
        with px.socket(socket.AF_INET, socket.SOCK_DGRAM, fileno=fd) as u:
            u.bind(("127.0.0.1", 0))
            u.settimeout(0.01)
            with pytest.raises(TimeoutError):
                u.recvfrom(10)
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as peer:
                threading.Timer(0.02, peer.sendto, (b"late", u.getsockname())).start()
                u.settimeout(TIMEOUT)
                assert u.recvfrom(10)[0] == b"late"
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_recv_into_a_read_only_buffer_is_a_type_error_as_the_standard_sockets():
    a, b = pair()
    with a, b:
        b.send(b"x")
        for ro in (b"abc", memoryview(bytearray(3)).toreadonly()):
            with pytest.raises(TypeError):
                a.recv_into(ro)
            with pytest.raises(TypeError):
                socket.socket.recv_into(a, ro)
        assert a.recv(1) == b"x"       # nothing was read


def test_a_throw_into_a_fiber_parked_in_recv_is_refused_as_a_switch_is():
    # gevent's kill is greenlet.throw: thrown into a fiber parked in recv
    # from another fiber's turn, it must be refused as a switch is (the
    # thrower gets RuntimeError, the recv goes on), not run the parked fiber
    # on the thrower's turn (before: the run failed with BusyError).
    import greenlet
    a, b = pair()
    with a, b:
        def body():
            box = {}
            def reader():
                box["g"] = greenlet.getcurrent()
                return a.recv(10)
            f = px.spawn(reader)
            until(lambda: "g" in box)
            settle()
            with pytest.raises(RuntimeError, match="a parked fiber's greenlet was switched"):
                box["g"].throw(KeyboardInterrupt)
            b.send(b"still")
            return f.join()
        assert run(body) == b"still"


def test_recv_sizes_past_a_c_int_are_taken_as_the_standard_sockets():
    # bufsize and nbytes are Py_ssize_t in the standard socket: recv(2**31)
    # is a read of what there is, recv_into(small, 2**31) a ValueError
    # (before: OverflowError "a C int is out of range" for both).
    a, b = pair()
    with a, b:
        b.send(b"x")
        assert a.recv(2**31) == b"x"
        with pytest.raises(ValueError, match="buffer too small"):
            a.recv_into(bytearray(3), 2**31)
        with pytest.raises(OverflowError):
            a.recv(1, 2**31)                  # flags are a C int, as there

        class Index:                          # numpy's ints: __index__, not int
            def __init__(self, v):
                self.v = v

            def __index__(self):
                return self.v
        b.send(b"abcd")
        assert a.recv(Index(3)) == b"abc" and a.recv(Index(3), Index(0)) == b"d"


@pytest.mark.parametrize("call", ["recv", "sendall"])
def test_a_socket_closed_after_its_waiter_was_woken_touches_not_the_fds_next_owner(call):
    # The waiter is woken (data came, or room), and before its turn another
    # fiber closes the socket and a new socket takes the fd number: the call
    # must end with ClosedResourceError, as the standard socket's, which reads
    # its fd at each try -- not read or write the new socket's bytes.
    a, b = pair()
    with b:
        if call == "sendall":
            fill(a)
        def body():
            out, ev = {}, px.Event()
            def waiter():
                try:
                    out["got"] = a.recv(100) if call == "recv" else a.sendall(b"LEAK" * 1000)
                except OSError as e:
                    out["got"] = type(e)
            def closer():
                ev.wait()
                fd = a.fileno()
                a.close()
                out["new"] = socket.socketpair()
                out["reused"] = fd in [s.fileno() for s in out["new"]]
                for s in out["new"]:
                    s.send(b"NEW")
            w = px.spawn(waiter)
            settle()
            c = px.spawn(closer)
            settle()
            if call == "recv":
                b.send(b"old")
            else:
                drain(b)
            ev.set()          # the closer runs before the woken waiter
            w.join()
            c.join()
            return out
        out = run(body)
        x, y = out["new"]
        with x, y:
            assert out["reused"]
            assert out["got"] is px.ClosedResourceError
            assert drain(x) == b"NEW" and drain(y) == b"NEW"


def test_recv_with_msg_trunc_returns_no_bytes_it_did_not_receive():
    # MSG_TRUNC makes recv(2) return a datagram's whole length, past the
    # buffer: the bytes object must hold only what was received, not
    # uninitialised heap (the standard socket's recv returns it).
    with px.socket(socket.AF_INET, socket.SOCK_DGRAM) as a, \
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as b:
        a.bind(("127.0.0.1", 0))
        b.sendto(b"A" * 100, a.getsockname())
        def body():
            return a.recv(4, socket.MSG_TRUNC)
        assert run(body) == b"AAAA"
        b.sendto(b"B" * 100, a.getsockname())
        buf = bytearray(4)
        assert run(lambda: a.recv_into(buf, 0, socket.MSG_TRUNC)) == 100   # the real length
        assert buf == b"BBBB"


def test_a_socket_made_elsewhere_is_taken_over_without_patching():
    raw_a, raw_b = socket.socketpair()
    raw_a.settimeout(3.5)
    a = px.socket.from_socket(raw_a)
    with a, raw_b:
        assert raw_a.fileno() == -1 and a.gettimeout() == 3.5
        assert isinstance(a, socket.socket) and "parataxis.socket" in repr(a)
        assert socket.socket.recv is not px.socket.recv    # the module is untouched
        def body():
            f = px.spawn(a.recv, 5)
            settle()
            raw_b.send(b"hello")
            assert f.join() == b"hello"
        run(body)


def test_makefile_reads_lines():
    a, b = pair()
    with a, b:
        def body():
            def writer():
                for i in range(100):
                    b.sendall(b"line %d\n" % i)
                    if i % 10 == 0:
                        px.yield_()
                b.shutdown(socket.SHUT_WR)
            px.spawn(writer)
            with a.makefile("rb") as f:
                lines = list(f)
            assert lines == [b"line %d\n" % i for i in range(100)]
            with a.makefile("w") as w:
                w.write("text\n")
            assert b.recv(10) == b"text\n"
        run(body)


def test_udp_sendto_and_recvfrom_wait_in_fibers():
    r = px.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s = px.socket(socket.AF_INET, socket.SOCK_DGRAM)
    with r, s:
        r.bind(("127.0.0.1", 0))
        def body():
            f = px.spawn(r.recvfrom, 100)
            settle()
            s.sendto(b"datagram", r.getsockname())
            data, addr = f.join()
            assert data == b"datagram" and addr[1] == s.getsockname()[1]
        run(body)


def test_names_are_looked_up_on_the_pool_when_connecting():
    with px.create_server(("127.0.0.1", 0)) as lst:
        port = lst.getsockname()[1]
        def body():
            with px.create_connection(("localhost", port)) as c:
                s, _ = lst.accept()
                with s:
                    c.sendall(b"by name")
                    assert s.recv(10) == b"by name"
        run(body)


def test_create_connection_takes_the_standard_default_timeout_sentinel():
    # http.client and others pass socket._GLOBAL_DEFAULT_TIMEOUT through to
    # create_connection: it means the default timeout, not a TypeError.
    with px.create_server(("127.0.0.1", 0)) as lst:
        def body():
            sentinel = socket._GLOBAL_DEFAULT_TIMEOUT
            with px.create_connection(lst.getsockname(), sentinel) as c:
                assert c.gettimeout() == socket.getdefaulttimeout()
                lst.accept()[0].close()
        run(body)


def test_every_waiting_call_of_the_standard_socket_waits_in_a_fiber():
    # Each recv*/send*/accept/connect method of socket.socket is px.socket's
    # own: one left as the standard's runs on the non-blocking fd and raises
    # BlockingIOError where the socket's timeout says wait (recvmsg_into did).
    calls = [n for n in dir(socket.socket) if n.startswith(("recv", "send", "accept", "connect"))]
    assert [n for n in calls if getattr(px.socket, n) is getattr(socket.socket, n)] == []
    a, b = pair()
    with a, b:
        def body():
            buf = bytearray(10)
            f = px.spawn(a.recvmsg_into, [buf])
            settle()
            b.send(b"late")
            assert f.join()[0] == 4 and buf[:4] == b"late"
        run(body)


def test_the_sockets_leave_no_resource_warning():
    code = ("import parataxis as px, socket\n"
            "def main():\n"
            "    lst = px.create_server(('127.0.0.1', 0))\n"
            "    c = px.create_connection(lst.getsockname())\n"
            "    s, _ = lst.accept()\n"
            "    s.sendall(b'x'); assert c.recv(1) == b'x'\n"
            "    with c.makefile('rb') as f: pass\n"
            "    for x in (s, c, lst): x.close()\n"
            "    st = px.open_tcp_stream('127.0.0.1', 9) if False else None\n"
            "px.run(main)\n"
            "print('clean')\n")
    out = subprocess.run([sys.executable, "-X", "dev", "-W", "error", "-c", code],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "clean\n" and out.stderr == ""


# -- streams --------------------------------------------------------------------

def test_streams_echo_and_read_lines():
    def handler(stream):
        while True:
            line = stream.receive_line()
            if not line:
                return
            stream.send_all(line.upper())

    def body():
        ready = px.Channel(1)
        server = px.spawn(lambda: px.serve_tcp(handler, 0, "127.0.0.1", ready=ready.send))
        lst = ready.recv()
        port = lst.getsockname()[1]
        with px.open_tcp_stream("localhost", port) as s:
            s.send_all(b"one\ntw")
            s.send_all(b"o\nthree")
            s.send_eof()
            assert s.receive_line() == b"ONE\n"
            assert s.receive_line() == b"TWO\n"
            assert s.receive_line() == b"THREE"     # the end: no b"\n"
            assert s.receive_line() == b""
        lst.close()
        server.join()
    run(body)


def test_receive_line_refuses_a_line_longer_than_its_bound():
    a, b = pair()
    with a, b:
        def body():
            s = px.SocketStream(a)
            b.sendall(b"x" * 100 + b"\nrest")
            with pytest.raises(ValueError):
                s.receive_line(max_bytes=50)
            assert s.receive_line() == b"x" * 100 + b"\n"
            assert s.receive_some(2) == b"re"
            b.close()
            assert s.receive_line() == b"st" and s.receive_line() == b""
        run(body)


def test_a_server_stopped_with_clients_connected_runs_every_handlers_finally():
    finished = []

    def handler(stream):
        try:
            while stream.receive_some():
                pass
        finally:
            finished.append(1)

    def body():
        ready = px.Channel(1)
        tok = px.CancellationToken()

        def serve():
            with pytest.raises(px.Cancelled):
                with px.cancel_scope(tok):
                    px.serve_tcp(handler, 0, "127.0.0.1", ready=ready.send)
        server = px.spawn(serve)
        port = ready.recv().getsockname()[1]
        clients = [px.open_tcp_stream("127.0.0.1", port) for _ in range(20)]
        until(lambda: len(clients) == 20)
        settle(20)
        tok.cancel()
        server.join()
        until(lambda: len(finished) == 20, "every handler's finally")
        for c in clients:
            assert c.receive_some() == b""      # each connection was closed
            c.close()
    run(body)


def test_a_server_closed_through_its_listener_waits_for_its_handlers():
    finished = []

    def handler(stream):
        try:
            stream.receive_some()
        finally:
            finished.append(1)

    def body():
        ready = px.Channel(1)
        server = px.spawn(lambda: px.serve_tcp(handler, 0, "127.0.0.1", ready=ready.send))
        lst = ready.recv()
        clients = [px.open_tcp_stream("127.0.0.1", lst.getsockname()[1]) for _ in range(5)]
        until(lambda: True)
        settle(10)
        lst.close()
        server.join()
        assert len(finished) == 5                # waited for, not left behind
        for c in clients:
            c.close()
    run(body)


def test_a_handler_that_raises_ends_its_connection_only(capsys):
    def handler(stream):
        if stream.receive_some() == b"boom":
            raise RuntimeError("handler failed")
        stream.send_all(b"fine")

    def body():
        ready = px.Channel(1)
        server = px.spawn(lambda: px.serve_tcp(handler, 0, "127.0.0.1", ready=ready.send))
        lst = ready.recv()
        port = lst.getsockname()[1]
        with px.open_tcp_stream("127.0.0.1", port) as bad:
            bad.send_all(b"boom")
            assert bad.receive_some() == b""
        with px.open_tcp_stream("127.0.0.1", port) as good:
            good.send_all(b"hi")
            assert good.receive_some() == b"fine"
        lst.close()
        server.join()
    run(body)
    assert "handler failed" in capsys.readouterr().err


def test_ctrl_c_in_accept_raises_keyboard_interrupt():
    code = ("import parataxis as px, sys\n"
            "def main():\n"
            "    lst = px.create_server(('127.0.0.1', 0))\n"
            "    print('ready', flush=True)\n"
            "    try:\n"
            "        lst.accept()\n"
            "    finally:\n"
            "        lst.close()\n"
            "try:\n"
            "    px.run(main)\n"
            "except KeyboardInterrupt:\n"
            "    print('interrupted', flush=True)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "ready\n"
        deadline = time.monotonic() + TIMEOUT
        out = ""
        while time.monotonic() < deadline:       # until it landed in the wait
            os.kill(proc.pid, signal.SIGINT)
            try:
                out, err = proc.communicate(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                continue
        assert out == "interrupted\n", err
    finally:
        proc.kill()
        proc.wait()


# -- the blocking pool ------------------------------------------------------------

@pytest.fixture
def pool_cap():
    """Sets the pool's cap for a test, back to the default after."""
    def set_cap(n):
        assert lib.px_blocking_set_max(n) == 0
    yield set_cap
    set_cap(64)


def test_pool_refuses_off_fiber_a_null_fn_bad_flags_and_a_zero_cap():
    with pytest.raises(px.NoFiberError):
        px.run_blocking(len, "x")
    def body():
        with pytest.raises(TypeError):
            px.run_blocking(None)
    run(body)
    assert lib.px_blocking_set_max(0) == lib.PX_EINVAL


def test_pool_thousand_jobs_from_a_hundred_fibers_each_get_their_result():
    def worker(i):
        return [px.run_blocking(lambda a, b: a * b, i, k) for k in range(10)]

    def body():
        fibers = [px.spawn(worker, i) for i in range(100)]
        return [f.join() for f in fibers]
    assert run(body) == [[i * k for k in range(10)] for i in range(100)]


def test_pool_job_exceptions_reach_the_fiber_with_their_traceback():
    def fails():
        raise KeyError("from the pool")

    def body():
        with pytest.raises(KeyError) as e:
            px.run_blocking(fails)
        assert e.value.__traceback__ is not None
        assert threading.main_thread() is not None
    run(body)


def test_pool_cancelled_before_start_never_runs_and_is_released_with_null(pool_cap):
    pool_cap(1)
    gate = threading.Event()
    ran = []

    def body():
        first = px.spawn(px.run_blocking, gate.wait, TIMEOUT)
        settle()
        with pytest.raises(px.Timeout):
            with px.timeout(0.02):
                px.run_blocking(ran.append, "second")    # queued behind the first
        gate.set()
        assert first.join() is True
    run(body)
    assert ran == []


def test_pool_a_scope_fired_before_the_call_runs_no_job():
    tok = px.CancellationToken()
    tok.cancel()
    ran = []

    def body():
        px.run_blocking(lambda: None)        # an idle pool thread, ready to take a job
        with px.cancel_scope(tok):
            for _ in range(200):
                for abandon in (False, True):
                    with pytest.raises(px.Cancelled):
                        px.run_blocking(ran.append, 1, abandon_on_cancel=abandon)
    run(body)
    assert ran == []


def test_pool_cancelled_while_running_waits_for_the_result_by_default():
    started = threading.Event()

    def job():
        started.set()
        time.sleep(0.1)
        return "done"

    def body():
        with px.move_on_after(0.01) as scope:
            assert px.run_blocking(job) == "done"     # waited for, despite the scope
            with pytest.raises(px.Timeout):
                px.sleep(0)                          # the scope fired all the same
        assert scope.expired
    run(body)


def test_pool_cancelled_while_running_with_abandon_returns_at_once_and_releases_later():
    release = threading.Event()

    class Result:
        pass
    refs = []

    def job():
        release.wait(TIMEOUT)
        r = Result()
        refs.append(weakref.ref(r))
        return r

    def body():
        t0 = time.monotonic()
        with pytest.raises(px.Timeout):
            with px.timeout(0.02):
                px.run_blocking(job, abandon_on_cancel=True)
        assert time.monotonic() - t0 < TIMEOUT / 2
    run(body)
    release.set()
    deadline = time.monotonic() + TIMEOUT
    while not refs or refs[0]() is not None:     # dropped by the pool thread
        assert time.monotonic() < deadline
        time.sleep(0.01)
        gc.collect()


def test_pool_fiber_calls_from_a_job_get_enofiber():
    def body():
        with pytest.raises(px.NoFiberError):
            px.run_blocking(px.sleep, 0)
        assert px.run_blocking(px.current_id) == 0
    run(body)


def test_pool_fn_sees_px_blocking_cancelled_and_may_stop_early():
    seen = []
    started = threading.Event()

    def job():
        started.set()
        deadline = time.monotonic() + TIMEOUT
        while not px.blocking_cancelled():
            assert time.monotonic() < deadline
            time.sleep(0.001)
        seen.append(True)
        return "stopped early"

    def body():
        assert not px.blocking_cancelled()
        with px.move_on_after(0.02):
            assert px.run_blocking(job) == "stopped early"
    run(body)
    assert seen == [True]


def test_pool_stray_wake_does_not_end_the_wait():
    gate = threading.Event()

    def body():
        f = px.spawn(px.run_blocking, lambda: gate.wait(TIMEOUT) and "job")
        settle()
        assert lib.px_wake(f.id) == 1
        settle()
        assert not f.done
        gate.set()
        assert f.join() == "job"
    run(body)


def test_pool_job_that_never_ends_is_abandoned_and_the_process_exits():
    code = ("import parataxis as px, threading\n"
            "def main():\n"
            "    with px.move_on_after(0.05):\n"
            "        px.run_blocking(threading.Event().wait, abandon_on_cancel=True)\n"
            "px.run(main)\n"
            "print('exited')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and out.stdout == "exited\n", out.stderr


def test_pool_fork_child_refuses_while_the_parent_completes_its_jobs():
    gate = threading.Event()

    def body():
        f = px.spawn(px.run_blocking, lambda: gate.wait(TIMEOUT) and "parent's")
        settle()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                def child():
                    try:
                        px.run_blocking(len, "x")
                    except px.ForkedError:
                        return 0
                    return 3
                code = px.run(child)
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.WEXITSTATUS(status) == 0
        gate.set()
        assert f.join() == "parent's"
    run(body)


# -- DNS ----------------------------------------------------------------------------

def test_dns_localhost_resolves_to_loopback():
    infos = run(px.getaddrinfo, "localhost", 80, 0, socket.SOCK_STREAM)
    assert any(i[4][0] in ("127.0.0.1", "::1") for i in infos)


def test_dns_numeric_hosts_resolve():
    def body():
        assert px.getaddrinfo("127.0.0.1", 7, type=socket.SOCK_STREAM)[0][4] == ("127.0.0.1", 7)
        assert px.getaddrinfo("::1", "7", socket.AF_INET6)[0][4][:2] == ("::1", 7)
    run(body)


def test_dns_an_invalid_name_fails_with_getaddrinfos_code():
    def body():
        with pytest.raises(socket.gaierror) as e:
            px.getaddrinfo("no-such-host.invalid", 80)
        assert e.value.errno in (socket.EAI_NONAME, socket.EAI_AGAIN, getattr(socket, "EAI_NODATA", -5))
    run(body)


def test_dns_off_fiber_calls_getaddrinfo():
    assert px.getaddrinfo("localhost", 80, type=socket.SOCK_STREAM) \
        == socket.getaddrinfo("localhost", 80, type=socket.SOCK_STREAM)


def test_dns_a_scope_that_fires_abandons_a_slow_lookup_which_frees_itself(monkeypatch):
    gate = threading.Event()
    returned = []

    def slow(*args):
        gate.wait(TIMEOUT)
        returned.append(True)
        return []
    monkeypatch.setattr(socket, "getaddrinfo", slow)

    def body():
        t0 = time.monotonic()
        with pytest.raises(px.Timeout):
            with px.timeout(0.02):
                px.getaddrinfo("slow.example", 80)
        assert time.monotonic() - t0 < TIMEOUT / 2
    run(body)
    gate.set()
    deadline = time.monotonic() + TIMEOUT
    while not returned:
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_pool_never_runs_more_jobs_at_once_than_its_cap(pool_cap):
    pool_cap(2)
    lock = threading.Lock()
    now = [0, 0]                                 # running, most at once

    def job():
        with lock:
            now[0] += 1
            now[1] = max(now[1], now[0])
        time.sleep(0.005)
        with lock:
            now[0] -= 1

    def body():
        fibers = [px.spawn(px.run_blocking, job) for _ in range(12)]
        for f in fibers:
            f.join()
    run(body)
    assert now[1] == 2
