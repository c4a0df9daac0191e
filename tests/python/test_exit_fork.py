"""Interpreter exit (run in a subprocess) and fork()."""
import os
import subprocess
import sys
import textwrap
import threading

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


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_fork_marks_queues_unusable_in_child():
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
    os.close(w)
    status = os.read(r, 1)
    os.close(r)
    os.waitpid(pid, 0)
    assert status == b"\x00"
    assert done.wait(TIMEOUT)                       # the parent's queue still works
    assert calls == [False]
    q.close()
    hq.close()
