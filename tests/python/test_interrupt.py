"""Ctrl-C and SystemExit reach the caller: HandlerQueue.wait() without a timeout
raises KeyboardInterrupt on SIGINT; KeyboardInterrupt or SystemExit raised by a
handler that drain() runs comes out of drain(); the owed calls stay owed and are
delivered later."""
import os
import select
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import parataxis
from conftest import TIMEOUT

CHILD = textwrap.dedent("""
    import signal, sys
    import parataxis

    calls = []
    hq = parataxis.HandlerQueue()
    q = parataxis.TimerQueue(executor=hq)
    q.add(3600, calls.append)                # owed, not due: wait() blocks
    try:
        print("ready", flush=True)
        hq.wait({timeout})
        print("wait returned", flush=True)
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        print("interrupted", flush=True)
    q.close()                                # the owed call is now queued ...
    print("drained", hq.drain(), calls, flush=True)   # ... and delivered
""")


def read_line(proc, deadline):
    """One line of the child's stdout, or None once `deadline` passed."""
    left = deadline - time.monotonic()
    if left <= 0 or not select.select([proc.stdout], [], [], left)[0]:
        return None
    return proc.stdout.readline()


@pytest.mark.parametrize("timeout", ["", "3600"])
def test_wait_raises_keyboard_interrupt_on_sigint(timeout):
    proc = subprocess.Popen([sys.executable, "-c", CHILD.format(timeout=timeout)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert read_line(proc, time.monotonic() + 30) == "ready\n"
        # The child blocks in wait() soon after "ready".  A SIGINT that lands
        # before the blocking call starts is acted upon when it starts, or in
        # the rare window inside it before the poll, not at all: send again.
        line, deadline = None, time.monotonic() + TIMEOUT
        while line is None and time.monotonic() < deadline:
            os.kill(proc.pid, signal.SIGINT)
            line = read_line(proc, min(deadline, time.monotonic() + 2))
        assert line == "interrupted\n"
        assert read_line(proc, time.monotonic() + 30) == "drained 1 [True]\n"
        assert proc.wait(30) == 0
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()


def fill(hq, q, n, handler):
    for _ in range(n):
        q.add(0, handler)
    end = time.monotonic() + TIMEOUT
    while len(hq) < n:
        assert time.monotonic() < end, "the expired calls never reached the queue"
        hq.wait(0.1)


@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit])
def test_drain_raises_what_a_handler_raised_and_keeps_the_rest(exc, unraisable):
    calls = []

    def handler(aborted):
        calls.append(aborted)
        if len(calls) == 2:
            raise exc()

    with parataxis.HandlerQueue() as hq, parataxis.TimerQueue(executor=hq) as q:
        fill(hq, q, 4, handler)
        with pytest.raises(exc):
            hq.drain()
        assert calls == [False, False]         # the second raised: drain stopped
        assert len(hq) == 2                    # the rest are still owed ...
        assert select.select([hq.fileno()], [], [], 0)[0]   # ... and the fd says so
        assert hq.drain() == 2
        assert calls == [False] * 4
    assert unraisable == []                    # not reported as unraisable


def test_drain_with_budget_stops_at_the_raising_handler(unraisable):
    calls = []

    def handler(aborted):
        calls.append(aborted)
        if len(calls) == 1:
            raise KeyboardInterrupt

    with parataxis.HandlerQueue() as hq, parataxis.TimerQueue(executor=hq) as q:
        fill(hq, q, 3, handler)
        with pytest.raises(KeyboardInterrupt):
            hq.drain(2)
        assert calls == [False] and len(hq) == 2
        assert hq.drain(1) == 1 and len(hq) == 1
    assert calls == [False, False, True]       # the last one aborted by close
    assert unraisable == []


def test_drain_still_reports_ordinary_exceptions_and_goes_on(unraisable):
    calls = []

    def handler(aborted):
        calls.append(aborted)
        if len(calls) == 1:
            raise ValueError("boom")

    with parataxis.HandlerQueue() as hq, parataxis.TimerQueue(executor=hq) as q:
        fill(hq, q, 3, handler)
        assert hq.drain() == 3
    assert calls == [False] * 3
    assert [type(u.exc_value) for u in unraisable] == [ValueError]
