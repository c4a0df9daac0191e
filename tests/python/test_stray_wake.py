"""Stray wakes over every wait of the sync family (and Fiber.join), as
tests/c/sync/stray_wake.c does from C and tests/lua/stray_wake_spec.lua from
Lua: test_<behaviour> is the C spec of the same name.

lib.px_wake(id) is px_wake: a wake nobody granted.  A waiter woken so keeps
waiting, with its place in the queue, and gets what it waited for only when
it is handed over.  Every Python fiber is hosted: a stray wake makes the
binding call its wait again, which parks again (PX_EYIELD) with its place
kept.  The rows are test_sync_family.py's table (KINDS), and one for join.
"""
import threading

import pytest

import parataxis as px
from parataxis._parataxis import lib
from sync_kit import TIMEOUT, run, settle
from test_sync_family import KINDS, spawn_waiting, waiter

pytestmark = pytest.mark.group("stray_wake")   # tests/behaviours.txt: stray_wake.<name>

ROW = {k.name: k for k in KINDS}


class JoinKind:
    """Every waiter joins one child, which ends when release sets its event."""
    name, queues, wakes_all, chains = "join", True, True, False

    def make(self):
        return {"go": px.Event()}

    def arm(self, h):
        def child():
            h["go"].wait()
            return "ended"
        h["child"] = px.spawn(child)
        settle()

    def block(self, h):
        return h["child"].join()

    def leave(self, h, got):
        assert got == "ended"

    def release(self, h):
        h["go"].set()

    def queued(self, h):
        return None


JOIN = JoinKind()


# -- stray wakes from the scheduler's own thread ------------------------------------

def stray_then_release(k):
    """A waiter A (and B behind it, where several queue) parks; A gets a stray
    wake, looks and parks again, still queued, nothing ended.  The release
    still goes to A, which is woken stray again before it ran (C's odd
    rounds); B is woken stray and then released before it ran (C's even
    rounds)."""
    def body():
        h = k.make()
        k.arm(h)
        log = []
        a = spawn_waiting(k, h, waiter(k, h, log, "a"))
        b = spawn_waiting(k, h, waiter(k, h, log, "b")) if k.queues else None
        assert lib.px_wake(a.id) == 1       # a wake nobody granted
        settle()
        assert not a.done and log == []     # still waiting ...
        if k.queued(h) is not None:
            assert k.queued(h) == (2 if b else 1)   # ... still queued
        k.release(h)                        # to A, first in line still
        assert lib.px_wake(a.id) in (0, 1)  # granted, not yet run: a stray wake again
        assert a.join() == "a"
        if b is not None:
            assert log[0] == "a"
            if not k.chains and not k.wakes_all:
                assert lib.px_wake(b.id) == 1   # parked still: stray ...
                k.release(h)                    # ... and released before it ran
            assert b.join() == "b"
            assert log == ["a", "b"]
        if k.queued(h) is not None:
            assert k.queued(h) == 0
    run(body)


def test_a_stray_wake_then_an_unlock_hands_the_mutex_over():
    stray_then_release(ROW["mutex"])


def test_a_stray_wake_then_an_unlock_hands_the_rwlock_over():
    stray_then_release(ROW["rwlock_write"])


def test_a_stray_wake_then_a_wrunlock_admits_the_readers():
    stray_then_release(ROW["rwlock_read"])


def test_a_stray_wake_then_done_ends_a_waitgroup_wait():
    stray_then_release(ROW["waitgroup"])


def test_a_stray_wake_then_the_last_arrival_releases_a_barrier():
    stray_then_release(ROW["barrier"])


def test_a_stray_wake_then_the_end_releases_a_once_wait():
    stray_then_release(ROW["once"])


def test_a_stray_wake_then_a_release_hands_a_sem_unit_over():
    stray_then_release(ROW["sem"])


def test_a_stray_wake_then_a_set_ends_an_event_wait():
    stray_then_release(ROW["event"])


def test_a_stray_wake_then_a_send_hands_the_value_over():
    stray_then_release(ROW["chan_recv"])


def test_a_stray_wake_then_a_recv_takes_the_sent_value():
    stray_then_release(ROW["chan_send"])


def test_a_stray_wake_then_the_end_of_the_joined_ends_a_join():
    stray_then_release(JOIN)


# -- single cases ----------------------------------------------------------------------

def test_a_stray_wake_of_an_ended_or_unknown_fiber_does_nothing():
    def body():
        f = px.spawn(lambda: None)
        f.join()
        assert lib.px_wake(f.id) == 0
        assert lib.px_wake(0) == 0
        assert lib.px_wake(1 << 40) == 0
    run(body)


def test_a_joiner_woken_as_its_fiber_ends_returns_once():
    def body():
        go, runs = px.Event(), []

        def waits_for_go():
            go.wait()
            return 9
        b = px.spawn(waits_for_go)

        def joins_once():
            runs.append(1)
            assert b.join() == 9
            return 5
        j = px.spawn(joins_once)
        px.yield_()                         # b waits, j joins b
        assert go.set() == 1                # b is ready ...
        assert lib.px_wake(j.id) == 1       # ... and j behind it: b ends
                                            # while j is ready already
        assert j.join() == 5
        settle(4)                           # nothing runs j again
        assert runs == [1]
        assert b.join() == 9
    run(body)


def test_a_hosted_waiter_woken_stray_calls_again_and_still_gets_the_unit():
    def body():
        s, got = px.Semaphore(0), []

        def acquirer():
            s.acquire()
            got.append(True)
        w = px.spawn(acquirer)
        px.yield_()
        assert s.waiters == 1               # it waits
        assert lib.px_wake(w.id) == 1
        px.yield_()
        px.yield_()
        assert got == []                    # it called again: still waiting,
        assert s.waiters == 1               # still queued
        assert lib.px_wake(w.id) == 1
        s.release()                         # before it runs
        assert s.value == 0                 # the unit is its own
        w.join()
        assert got == [True]
        assert s.value == 0
    run(body)


# -- a flood of px_wake from another thread ---------------------------------------------

ROUNDS = 20


class Flood:
    """Another OS thread that calls px_wake on every id of `ids`, a burst at
    a time: the main fiber gives it a burst (go) and, where it must know the
    burst landed, waits for it (landed).  What the thread finds wrong it keeps
    in `errors` (an assert in a thread would not fail the test)."""

    def __init__(self):
        self.ids = []
        self.errors = []
        self._go = threading.Semaphore(0)
        self._sent = threading.Semaphore(0)
        self._stop = False
        self._t = threading.Thread(target=self._loop)
        self._t.start()

    def _loop(self):
        while True:
            if not self._go.acquire(timeout=TIMEOUT):
                self.errors.append("no burst asked for in time")
                return
            if self._stop:
                return
            for fid in list(self.ids):
                r = lib.px_wake(fid)
                if r != 1:                  # posted to the scheduler: 1
                    self.errors.append(f"px_wake from another thread gave {r}")
            self._sent.release()

    def burst(self):
        self._go.release()

    def landed(self):
        assert self._sent.acquire(timeout=TIMEOUT), "a burst was not sent in time"

    def stop(self):
        self._stop = True
        self._go.release()
        self._t.join(TIMEOUT)
        assert not self._t.is_alive()
        assert self.errors == []


def flood_ends_no_wait(k):
    """Each round: fresh waiters park (several where several queue); two
    bursts of wakes land while they wait, and they still wait, still queued,
    none ended; a third burst lands during the release and the hand-overs;
    each waiter returns once, with what was handed over to it."""
    fl = Flood()

    def body():
        for _ in range(ROUNDS):
            h = k.make()
            k.arm(h)
            n = 3 if k.queues else 1
            log = []
            fibers = [spawn_waiting(k, h, waiter(k, h, log, i)) for i in range(n)]
            fl.ids[:] = [f.id for f in fibers]
            for _ in range(2):
                fl.burst()
                fl.landed()
                settle()                    # the woken looked and parked again
            assert log == [] and not any(f.done for f in fibers)
            if k.queued(h) is not None:
                assert k.queued(h) == n
            fl.burst()                      # lands during the release
            for _ in range(1 if k.chains or k.wakes_all else n):
                k.release(h)
            assert [f.join() for f in fibers] == list(range(n))
            assert sorted(log) == list(range(n))
            if k.queued(h) is not None:
                assert k.queued(h) == 0
            fl.landed()
    try:
        run(body)
    finally:
        fl.stop()


def test_a_wake_flood_from_another_thread_ends_no_mutex_lock():
    flood_ends_no_wait(ROW["mutex"])


def test_a_wake_flood_from_another_thread_ends_no_rwlock_wait():
    flood_ends_no_wait(ROW["rwlock_write"])
    flood_ends_no_wait(ROW["rwlock_read"])


def test_a_wake_flood_from_another_thread_ends_no_waitgroup_wait():
    flood_ends_no_wait(ROW["waitgroup"])


def test_a_wake_flood_from_another_thread_ends_no_barrier_wait():
    flood_ends_no_wait(ROW["barrier"])


def test_a_wake_flood_from_another_thread_ends_no_once_wait():
    flood_ends_no_wait(ROW["once"])


def test_a_wake_flood_from_another_thread_ends_no_sem_acquire():
    flood_ends_no_wait(ROW["sem"])


def test_a_wake_flood_from_another_thread_ends_no_event_wait():
    flood_ends_no_wait(ROW["event"])


def test_a_wake_flood_from_another_thread_ends_no_chan_recv():
    flood_ends_no_wait(ROW["chan_recv"])


def test_a_wake_flood_from_another_thread_ends_no_chan_send():
    flood_ends_no_wait(ROW["chan_send"])


def test_a_wake_flood_from_another_thread_ends_no_join():
    flood_ends_no_wait(JOIN)
