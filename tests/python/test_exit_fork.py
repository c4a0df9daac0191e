"""Interpreter exit (run in a subprocess) and fork()."""
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import parataxis
from conftest import TIMEOUT


# One write per line: print() writes the text and the newline separately, so lines
# printed by the worker and the main thread at once could interleave.
PRELUDE = """
import sys
def print(*a, flush=True):
    sys.stdout.write(" ".join(map(str, a)) + "\\n")
    sys.stdout.flush()
"""


def run_script(src):
    r = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(src)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "Fatal" not in r.stderr and "Traceback" not in r.stderr, r.stderr
    return r.stdout.split()


def test_exit_aborts_pending_timers():
    out = run_script("""
        import parataxis
        q = parataxis.TimerQueue()
        q.add(60, lambda a: print("oneshot", a, flush=True))
        q.add_periodic(0, 0.001, lambda a: a and print("periodic", a, flush=True))
        t = parataxis.Timer(q); t.expires_after(60)
        t.async_wait(lambda a: print("timer", a, flush=True))
        print("exit", flush=True)
    """)
    assert out[0] == "exit"
    assert sorted(zip(out[1::2], out[2::2])) == [
        ("oneshot", "True"), ("periodic", "True"), ("timer", "True")]


def test_exit_while_a_handler_runs():
    out = run_script("""
        import threading, time, parataxis
        started = threading.Event()
        def slow(a):
            started.set()
            time.sleep(0.3)
            print("slow-done", a, flush=True)
        q = parataxis.TimerQueue()
        q.add(0, slow)
        q.add_periodic(60, 1, lambda a: print("periodic", a, flush=True))
        started.wait(10)
        print("exit", flush=True)
    """)
    assert out == ["exit", "slow-done", "False", "periodic", "True"]


def test_exit_with_asyncio_futures_and_handler_queue():
    out = run_script("""
        import asyncio, concurrent.futures, parataxis
        loop = asyncio.new_event_loop()
        qa = parataxis.TimerQueue(executor=loop)
        qa.add(60, lambda a: print("loop", a, flush=True))
        loop.close()
        ex = concurrent.futures.ThreadPoolExecutor(1)
        qf = parataxis.TimerQueue(executor=ex)
        qf.add(60, lambda a: print("pool", a, flush=True))
        hq = parataxis.HandlerQueue()
        qh = parataxis.TimerQueue(executor=hq)
        qh.add(60, lambda a: print("hq", a, flush=True))
        print("exit", flush=True)
    """)
    assert out[0] == "exit"
    assert sorted(out[1:]) == sorted(["loop", "True", "pool", "True", "hq", "True"])


def test_queue_dropped_inside_its_own_handler():
    out = run_script("""
        import threading, parataxis
        done = threading.Event()
        box = [parataxis.TimerQueue()]
        box[0].add(60, lambda a: print("other", a, flush=True))
        def h(a):
            box.clear()          # last reference: __del__ -> close on the worker
            done.set()
        box[0].add(0, h)
        done.wait(10)
        print("exit", flush=True)
    """)
    assert sorted(out) == ["True", "exit", "other"]


def _child_code(pid, r, w):
    """The code a forked child wrote on the pipe (r, w) before it exited: a
    bit for each check that failed there, 0 when all held."""
    os.close(w)
    code = os.read(r, 1)
    os.close(r)
    os.waitpid(pid, 0)
    return code[0] if code else None   # None: it wrote nothing


# -- fork: tests/behaviours.txt fork.<name>, as tests/c/fork/<name>.c ----------

@pytest.mark.group("fork")
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_child():
    """In the child of a fork the parent's queues, handles and timers refuse
    work with ForkedError and close without joining a missing worker; a queue
    made in the child works; the parent's queue goes on."""
    q = parataxis.TimerQueue()
    hq = parataxis.HandlerQueue()
    calls, done = [], threading.Event()
    h = q.add(0.2, lambda a: (calls.append(a), done.set()))
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:                                   # the child
        code = 0
        try:
            for call in (lambda: q.add(0, print), lambda: q.cancel(h), h.cancel,
                         lambda: q.pending,
                         lambda: parataxis.Timer(q), lambda: hq.drain()):
                try:
                    call()
                    code |= 1
                except parataxis.ForkedError:
                    pass
            q.close()                               # must not join a missing worker
            hq.close()
            with parataxis.TimerQueue() as q2:      # a new queue works in the child
                ev = threading.Event()
                q2.add(0, lambda a: ev.set())
                if not ev.wait(10):
                    code |= 2
        except BaseException:
            code |= 4
        os.write(w, bytes([code]))
        os._exit(0)
    assert _child_code(pid, r, w) == 0
    assert done.wait(TIMEOUT)                       # the parent's queue still works
    assert calls == [False]
    q.close()
    hq.close()


@pytest.mark.group("fork")
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_fiber():
    """A fiber that forks: the parent's run goes on; the child may start a new
    run of its own and exit (the forked run belongs to the parent)."""
    out = run_script("""
        import os, parataxis as px
        def child_main():
            return px.spawn(lambda: 5).join()
        def main():
            other = px.spawn(px.sleep, 0.01)
            pid = os.fork()
            if pid == 0:
                try:
                    try:
                        r = px.run(child_main)
                    except px.Error as e:
                        r = type(e).__name__
                    print("child", r, flush=True)
                finally:
                    os._exit(0)
            _, status = os.waitpid(pid, 0)
            other.join()
            return os.waitstatus_to_exitcode(status)
        print("parent", px.run(main))
    """)
    assert out[-2:] == ["parent", "0"]
    assert out[:2] == ["child", "5"]   # BusyError before the fix in _host.c begin()


@pytest.mark.group("fork")
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_timerq():
    """A child forked right after its parent's first add (the parent's worker
    is starting) makes a queue of its own: a due handler is called once, not
    aborted, and its close returns; the parent's queue goes on."""
    q = parataxis.TimerQueue()
    calls, done = [], threading.Event()
    q.add(0.05, lambda a: (calls.append(a), done.set()))
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:                                   # the child
        code = 0
        try:
            got, ev = [], threading.Event()
            q2 = parataxis.TimerQueue()
            q2.add(0, lambda a: (got.append(a), ev.set()))
            if not ev.wait(10):
                code |= 1
            q2.close()
            if got != [False]:
                code |= 2
        except BaseException:
            code |= 4
        os.write(w, bytes([code]))
        os._exit(0)
    assert _child_code(pid, r, w) == 0
    assert done.wait(TIMEOUT)                       # the parent's queue still works
    assert calls == [False]
    q.close()


@pytest.mark.group("fork")
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_locks():
    """Children forked while other threads post to a running scheduler (its
    inbox lock) can run px.run of their own and exit: no lock a thread of the
    parent held at the fork is left taken in the child."""
    stop, have = threading.Event(), threading.Event()
    box = {}

    def main():
        box["sched"] = px_sched = parataxis.scheduler()
        have.set()
        while not stop.is_set():
            parataxis.sleep(0.001)
        return px_sched

    def poster():
        assert have.wait(TIMEOUT)
        while not stop.is_set():
            try:
                box["sched"].post(lambda: None)
            except parataxis.Closed:
                return

    runner = threading.Thread(target=parataxis.run, args=(main,))
    runner.start()
    posters = [threading.Thread(target=poster) for _ in range(2)]
    for t in posters:
        t.start()
    try:
        assert have.wait(TIMEOUT)
        for _ in range(10):
            pid = os.fork()
            if pid == 0:                           # the child
                code = 1
                try:
                    if parataxis.run(lambda: parataxis.spawn(lambda: 5).join()) == 5:
                        code = 0
                finally:
                    os._exit(code)
            deadline = time.monotonic() + TIMEOUT
            while True:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    break
                if time.monotonic() > deadline:    # it hung on a lock of the parent
                    os.kill(pid, 9)
                    os.waitpid(pid, 0)
                    pytest.fail("a child of the fork hung")
                time.sleep(0.01)
            assert os.waitstatus_to_exitcode(status) == 0
    finally:
        stop.set()
        for t in posters:
            t.join(TIMEOUT)
        runner.join(TIMEOUT)
