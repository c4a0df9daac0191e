"""The virtual clock: px.run(main, clock=px.VirtualClock()).  It stands still
while fibers run, jumps to the next deadline when every fiber waits on time
alone, and moves with real time while something from outside could still
come (an fd wait, a blocking-pool job)."""
import socket
import threading
import time

import pytest

import parataxis as px

HOUR = 3600.0
EPS = 1e-6          # px.now() is float seconds of whole nanoseconds


def virtual(main, *args):
    return px.run(main, *args, clock=px.VirtualClock())


def test_now_stands_still_while_fibers_run():
    def busy(seconds):              # real time goes by, no fiber waits
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            px.yield_()
        return px.now()

    def main():
        t0 = px.now()
        fibers = [px.spawn(busy, 0.02) for _ in range(3)]
        seen = busy(0.05)
        seen_by = [f.join() for f in fibers]
        assert seen == t0 and seen_by == [t0] * 3 and px.now() == t0
        px.sleep(0.5)                   # the only wait: the clock jumps to it
        assert abs(px.now() - (t0 + 0.5)) < EPS
        return t0
    virtual(main)


def test_ten_thousand_hour_long_sleeps_take_no_real_time():
    def sleeper(n):
        for _ in range(n):
            px.sleep(HOUR)

    def main():
        t0, r0 = px.now(), time.monotonic()
        fibers = [px.spawn(sleeper, 1000) for _ in range(10)]    # 10,000 sleeps
        for f in fibers:
            f.join()
        return px.now() - t0, time.monotonic() - r0
    elapsed, real = virtual(main)
    assert abs(elapsed - 1000 * HOUR) < 1e-3        # each fiber slept 1000 hours
    assert real < 1.0


def test_a_timeout_racing_a_grant_is_decided_once():
    """The holder's sleep and the waiter's timeout end at the same instant
    (the clock stands still between the two): the waiter either got the
    lock and no Timeout, or Timeout and not the lock -- and then the grant
    went on to the next waiter.  Never both, never neither."""
    def trial(waiter_first):
        m = px.Mutex()
        outcome = []

        def holder():
            with m:
                px.sleep(1)

        def waiter():
            try:
                with px.timeout(1):
                    m.lock()
            except px.Timeout:
                assert m.owner != px.current_id()
                outcome.append("timed out")
                return
            assert m.owner == px.current_id()
            outcome.append("locked")
            m.unlock()

        def next_waiter():
            with m:
                outcome.append("next")

        fibers = [px.spawn(waiter), px.spawn(holder)]
        if not waiter_first:
            fibers.reverse()
        px.yield_()                     # both started: the deadlines are equal
        fibers.append(px.spawn(next_waiter))
        t0 = px.now()
        for f in fibers:
            f.join()
        assert len(outcome) == 2 and outcome[-1] == "next", outcome
        assert m.owner is None and m.waiters == 0
        assert px.now() - t0 <= 1.0 + EPS
        return outcome[0]

    def main():
        return {trial(i % 2 == 0) for i in range(100)}
    assert virtual(main) <= {"locked", "timed out"}


def test_a_deadlock_is_still_reported():
    """Every fiber waits, but not on time: no deadline to jump to, so the
    run reports the deadlock (after the sleeps that were pending ended)."""
    slept = []

    def sleeper():
        px.sleep(HOUR)
        slept.append(px.now())

    def main():
        ev = px.Event(name="never set")
        f = px.spawn(sleeper)
        ev.wait()
        f.join()
    r0 = time.monotonic()
    with pytest.raises(px.DeadlockError) as e:
        virtual(main)
    assert time.monotonic() - r0 < 5.0
    assert len(slept) == 1                          # the hour went by first
    report = str(e.value)
    assert '"Event wait"' in report and 'event "never set"' in report, report


def test_an_unknown_clock_is_refused():
    ran = []
    for clock in ("virtual", 1, object(), px.VirtualClock, True):
        with pytest.raises(TypeError, match="clock"):
            px.run(ran.append, 1, clock=clock)
    assert ran == []
    assert px.run(lambda: px.now(), clock=None) > 0     # None: the real clock
    assert px.run(lambda: 7, clock=px.VirtualClock()) == 7


def test_waits_in_real_time_while_a_pool_job_runs():
    def job():
        time.sleep(0.05)                # real time, on a pool thread
        return "done"

    def main():
        t0 = px.now()
        sleeper = px.spawn(lambda: (px.sleep(HOUR), px.now())[1])
        assert px.run_blocking(job) == "done"
        job_took = px.now() - t0
        return job_took, sleeper.join() - t0
    r0 = time.monotonic()
    job_took, slept = virtual(main)
    assert 0.01 <= job_took < 600, job_took        # the clock moved with real time
    assert abs(slept - HOUR) < EPS                 # then jumped to the hour
    assert time.monotonic() - r0 < 10.0


def test_waits_in_real_time_while_an_fd_wait_is_pending():
    a, b = socket.socketpair()

    def later():
        time.sleep(0.05)
        b.send(b"x")

    def reader():
        t0 = px.now()
        px.wait_readable(a)
        assert a.recv(1) == b"x"
        return px.now() - t0

    def main():
        t0 = px.now()
        sleeper = px.spawn(lambda: (px.sleep(HOUR), px.now())[1])
        r = px.spawn(reader)
        thread.start()
        return r.join(), sleeper.join() - t0
    thread = threading.Thread(target=later)
    r0 = time.monotonic()
    try:
        waited, slept = virtual(main)
    finally:
        thread.join()
        a.close()
        b.close()
    assert 0.01 <= waited < 600, waited            # real time, not the hour
    assert abs(slept - HOUR) < EPS
    assert time.monotonic() - r0 < 10.0
