"""C's duration rule through the binding (tests/c/api/durations.c): 0 and the
least duration work, a negative or NaN one is refused, and one whose
nanoseconds pass INT64_MAX -- 2**63 ns or more (about 9223372036.85 s, 292
years), infinity, 10**400 -- saturates to "never": accepted, never fires, and
ends like any other (a cancel, a scope)."""
import math
import threading
import time

import pytest

import parataxis
from conftest import TIMEOUT

LONGEST, TOO_LONG = 9223372036.0, 9223372037.0   # the last that fits, the first that does not
NEVER = (TOO_LONG, math.inf, 10**400)


def test_timerq_delays_saturate(rec):
    with parataxis.TimerQueue() as q:
        t0 = time.monotonic()
        q.add(0, rec)
        q.add(1e-9, rec)
        assert rec.wait_for(2) == [False, False]
        assert time.monotonic() - t0 >= 0
        for bad in (-1, -1e-9, math.nan, -math.inf):
            with pytest.raises(ValueError):
                q.add(bad, rec)
        hs = [q.add(LONGEST, rec)] + [q.add(d, rec) for d in NEVER]
        fired = threading.Event()
        q.add(0.02, lambda aborted: fired.set())    # due handlers run in deadline order
        assert fired.wait(TIMEOUT)
        assert rec.calls == [False, False]          # none of the long ones came
        assert q.pending == len(hs) == 4
        assert all(h.cancel() for h in hs)
        assert rec.wait_for(6)[2:] == [True] * 4


def test_timerq_periods_saturate(rec):
    with parataxis.TimerQueue() as q:
        hs = [q.add_periodic(LONGEST, LONGEST, rec)]
        for d in NEVER:
            hs += [q.add_periodic(d, 1, rec), q.add_periodic(60, d, rec)]
        for bad in (-1, math.nan):
            with pytest.raises(ValueError):
                q.add_periodic(bad, 1, rec)
            with pytest.raises(ValueError):
                q.add_periodic(0, bad, rec)
        with pytest.raises(ValueError):
            q.add_periodic(0, 0, rec)
        assert q.pending == len(hs) == 7
        # A period of "never": the first tick, and then never another.
        ticks = []
        first, final = threading.Event(), threading.Event()

        def once(aborted):
            ticks.append(aborted)
            (final if aborted else first).set()

        h = q.add_periodic(0, math.inf, once)
        assert first.wait(TIMEOUT)
        fired = threading.Event()
        q.add(0.02, lambda aborted: fired.set())
        assert fired.wait(TIMEOUT)
        assert ticks == [False] and rec.calls == []
        assert h.cancel() is True
        assert final.wait(TIMEOUT) and ticks == [False, True]
        assert all(h.cancel() for h in hs)
        assert rec.wait_for(7) == [True] * 7


def test_deadline_timer_durations_saturate(rec):
    with parataxis.TimerQueue() as q:
        t = parataxis.Timer(q)
        for d in (0, 1e-9):
            assert t.expires_after(d) == 0
            t.async_wait(rec)
            rec.wait_for(len(rec.calls) + 1)
        assert rec.calls == [False, False]
        for bad in (-1, -1e-9, math.nan):
            with pytest.raises(ValueError):
                t.expires_after(bad)
        assert t.expires_after(LONGEST) == 0
        for d in NEVER:
            assert t.expires_after(d) == 0
            assert t.expiry >= LONGEST
        t.async_wait(rec)
        fired = threading.Event()
        q.add(0.02, lambda aborted: fired.set())
        assert fired.wait(TIMEOUT)
        assert rec.calls == [False, False]
        assert t.cancel() == 1
        assert rec.wait_for(3) == [False, False, True]


def test_queue_wait_timeouts_saturate():
    with parataxis.HandlerQueue() as hq, parataxis.TimerQueue(executor=hq) as q:
        assert hq.wait(0) is False
        t0 = time.monotonic()
        assert hq.wait(1e-9) is False
        assert time.monotonic() - t0 >= 0
        for bad in (-1, math.nan):
            with pytest.raises(ValueError):
                hq.wait(bad)
        calls = []
        for timeout in (None,) + NEVER:              # each waits for the post
            q.add(0.005, calls.append)
            assert hq.wait(timeout) is True
            assert hq.drain() == 1
        assert calls == [False] * 4
        q.add(0, calls.append)
        assert hq.wait(TIMEOUT) is True
        assert hq.wait(math.inf) is True             # ready: no wait at all
        assert hq.drain() == 1


def test_fiber_waits_and_scopes_saturate():
    px = parataxis

    def main():
        t0 = time.monotonic()
        px.sleep(0)
        px.sleep(1e-9)
        assert time.monotonic() - t0 >= 0
        for bad in (-1, math.nan):
            with pytest.raises(ValueError):
                px.sleep(bad)
            with pytest.raises(ValueError):
                px.timeout(bad)
            with pytest.raises(ValueError):
                px.move_on_after(bad)
        for d in NEVER:                              # a sleep of "never": only a scope ends it
            with pytest.raises(px.Timeout):
                with px.timeout(0.005):
                    px.sleep(d)
        for d in (0, 1e-9):                          # a scope of 0 or 1 ns fires
            with pytest.raises(px.Timeout):
                with px.timeout(d):
                    px.sleep(100)
            with px.move_on_after(d) as scope:
                px.sleep(100)
            assert scope.expired
        for d in NEVER:                              # a scope of "never" does not
            with px.timeout(d) as scope:
                px.sleep(0.001)
            assert not scope.fired
            with px.move_on_after(d) as scope:
                px.sleep(0.001)
            assert not scope.expired
        return True

    assert px.run(main) is True
