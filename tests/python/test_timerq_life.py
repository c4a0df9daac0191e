"""The timer queue's life, mirrored from tests/c/timerq/ and the Lua suite: a
burst of cancels, an executor that cannot run what it accepted, a HandlerQueue
drained by one thread while another cancels, the descriptor an event loop
polls, a handler's error, waits without a bound, and a fiber run's scheduler
as the executor."""
import concurrent.futures
import gc
import math
import random
import select
import threading
import time
import weakref

import pytest

import parataxis
from conftest import TIMEOUT, Recorder

pytestmark = pytest.mark.group("timerq")   # tests/behaviours.txt: timerq.<name>


def readable(fd):
    return select.select([fd], [], [], 0)[0] == [fd]


def test_a_burst_of_cancels_is_delivered_aborted_once_each():
    # As abort_linger.c, with the linger of this binding's queues (1 ms):
    # every cancel that won is followed by exactly one aborted call on the
    # worker, also one made after the burst was delivered; nothing is called
    # after close.
    n = 200
    recs = [Recorder() for _ in range(n + 1)]
    q = parataxis.TimerQueue()
    ids = [q.add(10, recs[i]) for i in range(n)]
    assert all(q.cancel(h) is True for h in ids)
    for r in recs[:n]:
        assert r.wait_for(1) == [True]
    late = q.add(10, recs[n])                  # one more, after the burst was delivered
    assert q.cancel(late) is True
    assert recs[n].wait_for(1) == [True]
    q.close()
    for r in recs:
        assert r.calls == [True]
        assert r.threads[0] != threading.get_ident()   # on the worker


class KeepingExecutor(concurrent.futures.Executor):
    """Keeps every call's future (it never runs them): its owner then cancels
    them, as an executor that cannot run what it accepted does."""

    def __init__(self):
        self.futures = []
        self.lock = threading.Lock()
        self.submitted = threading.Semaphore(0)

    def submit(self, fn, *args, **kwargs):
        f = concurrent.futures.Future()
        with self.lock:
            self.futures.append(f)
        self.submitted.release()
        return f


def test_executor_aborts_what_it_cannot_run():
    # As executors.c: the one-shot's one call and the periodic timer's final
    # one (not re-armed) come aborted, from the executor's cancel; the timers
    # are gone then.
    ex = KeepingExecutor()
    once, ticks = Recorder(), Recorder()
    with parataxis.TimerQueue(executor=ex) as q:
        h = q.add(0, once)
        ph = q.add_periodic(0, 0.001, ticks)
        for _ in range(2):
            assert ex.submitted.acquire(timeout=TIMEOUT)
        with ex.lock:
            kept = list(ex.futures)
        assert [f.cancel() for f in kept] == [True, True]
        assert once.calls == [True]             # inline, in the cancelling thread
        assert ticks.calls == [True]            # the final call: not re-armed
        assert q.cancel(h) is False
        assert q.cancel(ph) is False
        assert q.pending == 0
    with ex.lock:
        assert len(ex.futures) == 2             # nothing more was submitted
    assert once.calls == [True]
    assert ticks.calls == [True]


def test_executor_ticks_and_handler_cancels():
    # As cancel_wake.c: a HandlerQueue drained by one thread; periodic timers
    # cancelled from another thread while they tick; one-shot timers that
    # cancel a few later ones from their handlers, on the draining thread.
    # Each periodic timer: one winning cancel, one final call, no tick after
    # it; each one-shot: one call, aborted exactly when a cancel of it won.
    periodic, oneshot = 50, 400
    lock = threading.Lock()
    ticks, finals, after_final = [0] * periodic, [0] * periodic, [0] * periodic
    shots = [[] for _ in range(oneshot)]
    shot_wins = [0] * oneshot
    sids = [None] * oneshot
    left = [periodic + oneshot]
    all_done = threading.Event()

    def one_done():
        left[0] -= 1
        if left[0] == 0:
            all_done.set()

    def on_tick(i):
        def fn(aborted):
            with lock:
                if finals[i]:
                    after_final[i] += 1
                if aborted:
                    finals[i] += 1
                    one_done()
                else:
                    ticks[i] += 1
        return fn

    def on_shot(i):
        def fn(aborted):
            if not aborted:                     # cancel a few later shots, from here
                for k in (1, 2, 3):
                    o = (i + k * 37) % oneshot
                    if sids[o] is not None and q.cancel(sids[o]):
                        with lock:
                            shot_wins[o] += 1
            with lock:
                shots[i].append(aborted)
                one_done()
        return fn

    stop = threading.Event()
    with parataxis.HandlerQueue() as hq:
        q = parataxis.TimerQueue(executor=hq)

        def drainer():
            while not stop.is_set():
                hq.wait(0.005)
                hq.drain()

        th = threading.Thread(target=drainer)
        th.start()
        try:
            pids = [q.add_periodic(1e-5 * (i % 7), 2e-5 + 1e-6 * (i % 13), on_tick(i))
                    for i in range(periodic)]
            for i in range(oneshot):
                sids[i] = q.add(1e-5 * (i % 300), on_shot(i))
            wins = [0] * periodic
            rng = random.Random(7)

            def canceller():
                for i in range(periodic):
                    if rng.random() < 0.5:     # let it tick first, or not
                        end = parataxis.now() + TIMEOUT
                        while ticks[i] == 0 and parataxis.now() < end:
                            pass
                    wins[i] += q.cancel(pids[i])

            ct = threading.Thread(target=canceller)
            ct.start()
            ct.join()
            assert all_done.wait(2 * TIMEOUT), f"{left[0]} calls did not come"
            assert q.pending == 0
            q.close()
        finally:
            stop.set()
            th.join()
        hq.drain()
    assert wins == [1] * periodic
    assert finals == [1] * periodic
    assert after_final == [0] * periodic
    for i in range(oneshot):
        assert len(shots[i]) == 1
        assert shot_wins[i] <= 1
        assert shots[i] == [bool(shot_wins[i])]


def test_fileno_is_readable_exactly_while_calls_are_owed():
    # The HandlerQueue's descriptor, as the Lua queue's fileno() and
    # px_queue_fd in C: readable from the due call's post until the drain that
    # runs it, and not otherwise.
    with parataxis.HandlerQueue() as hq, parataxis.TimerQueue(executor=hq) as q:
        fd = hq.fileno()
        assert fd >= 0
        assert not readable(fd)
        for delay in (0, 0.02):
            rec = Recorder()
            q.add(delay, rec)
            assert hq.wait(TIMEOUT) is True
            assert readable(fd)
            assert readable(fd)                 # asking does not clear it
            assert rec.calls == []
            assert hq.drain() == 1
            assert rec.calls == [False]
            assert not readable(fd)


def test_fileno_stays_readable_after_a_handler_error_while_calls_are_owed():
    # A handler's error that ends a drain (in Python a SystemExit or a
    # KeyboardInterrupt: an Exception goes to sys.unraisablehook and the drain
    # goes on) leaves the calls after it queued, and the descriptor readable.
    calls, errors = [0], 0

    def boom(aborted):
        raise SystemExit("boom")

    def ok(aborted):
        calls[0] += 1

    with parataxis.HandlerQueue() as hq, parataxis.TimerQueue(executor=hq) as q:
        fd = hq.fileno()
        q.add(0.001, boom)
        for _ in range(4):
            q.add(0.001, ok)
        end = parataxis.now() + TIMEOUT
        while len(hq) < 5 and parataxis.now() < end:   # until the worker queued all five
            hq.wait(0.01)
        assert len(hq) == 5
        while calls[0] < 4 and parataxis.now() < end:  # an fd-driven loop
            if select.select([fd], [], [], 0.5)[0]:
                try:
                    hq.drain()
                except SystemExit:
                    errors += 1
                    if calls[0] < 4:
                        assert readable(fd), "calls owed, fd not readable"
        assert errors == 1
        assert calls[0] == 4
        assert not readable(fd)


# -- a handler's error, and close ---------------------------------------------

def test_an_error_in_a_handler_propagates_and_loses_no_other_call():
    # A handler's error that propagates out of the drain running it (in Python
    # a SystemExit or KeyboardInterrupt; an Exception goes to
    # sys.unraisablehook): the calls beside it are not lost.
    ok_calls, raised = [0], False

    def boom(aborted):
        raise SystemExit("boom")

    def ok(aborted):
        ok_calls[0] += 1

    with parataxis.HandlerQueue() as hq, parataxis.TimerQueue(executor=hq) as q:
        q.add(0.001, boom)
        q.add(0.001, ok)
        q.add(0.001, ok)
        for _ in range(400):
            if ok_calls[0] == 2 and raised:
                break
            hq.wait(0.05)
            try:
                hq.drain()
            except SystemExit:
                raised = True
    assert ok_calls[0] == 2
    assert raised


def test_close_delivers_every_owed_call_from_a_close_scope_that_ends_in_an_error(unraisable):
    # A with-block that ends in an exception closes its queue: every owed
    # call is delivered, a handler's own exception (reported, not raised)
    # does not replace the block's.
    calls = [0]

    def bad(aborted):
        raise ZeroDivisionError("in handler")

    def ok(aborted):
        calls[0] += 1

    with pytest.raises(RuntimeError, match="in scope"):
        with parataxis.TimerQueue() as q:
            q.add(60, bad)
            q.add(60, ok)
            raise RuntimeError("in scope")
    assert calls[0] == 1
    with unraisable.cond:
        assert unraisable.cond.wait_for(lambda: unraisable, TIMEOUT)
    assert [u.exc_type for u in unraisable] == [ZeroDivisionError]


# -- waiting without a bound (Lua's q:run(), here HandlerQueue.wait) ------------

def _waits_until_a_call_is_due(wait):
    def test():
        calls = []
        with parataxis.HandlerQueue() as hq, parataxis.TimerQueue(executor=hq) as q:
            q.add(0.05, calls.append)
            t0 = time.monotonic()
            assert wait(hq) is True
            ran = hq.drain()
            took = time.monotonic() - t0
        assert ran == 1
        assert calls == [False]
        assert took >= 0.045, f"returned after {took} s"
    return test


for _name, _wait in (("math_huge", lambda hq: hq.wait(math.inf)),
                     ("1e300", lambda hq: hq.wait(1e300)),
                     ("1e10_above_the_c_range", lambda hq: hq.wait(1e10)),
                     ("no_timeout", lambda hq: hq.wait())):
    _test = _waits_until_a_call_is_due(_wait)
    _test.__name__ = f"test_run_without_a_bound_with_{_name}_waits_until_a_call_is_due"
    globals()[_test.__name__] = _test
del _name, _wait, _test


def test_run_without_a_bound_waits_for_a_periodic_timers_next_tick():
    ticks, finals = [0], [0]

    def tick(aborted):
        if aborted:
            finals[0] += 1
        else:
            ticks[0] += 1

    with parataxis.HandlerQueue() as hq, parataxis.TimerQueue(executor=hq) as q:
        h = q.add_periodic(0.03, 0.03, tick)
        t0 = time.monotonic()
        assert hq.wait() is True
        assert hq.drain() == 1
        took = time.monotonic() - t0
        assert ticks[0] == 1
        assert took >= 0.025, f"returned after {took} s"
        assert q.cancel(h) is True
        assert hq.wait() is True
        assert hq.drain() == 1                  # the final aborted call
        assert finals[0] == 1


def test_run_without_a_bound_refuses_a_nan_or_negative_timeout_and_changes_nothing():
    calls = []
    with parataxis.HandlerQueue() as hq, parataxis.TimerQueue(executor=hq) as q:
        q.add(0, calls.append)
        for bad in (math.nan, -1, -math.inf):
            with pytest.raises(parataxis.InvalidArgument):
                hq.wait(bad)
        with pytest.raises(TypeError):
            hq.wait("1")
        assert calls == []
        assert hq.wait() is True
        assert hq.drain() == 1
    assert calls == [False]


# -- on a fiber run's scheduler ---------------------------------------------------

def test_after_the_run_its_calls_come_aborted_to_the_queue(rec):
    def main():
        return parataxis.TimerQueue(executor=parataxis.scheduler())
    q = parataxis.run(main)
    q.add(0.01, rec)                            # a timer added after the run
    assert rec.wait_for(1) == [True]
    q.close()
    assert rec.calls == [True]


def test_a_deadlocked_run_waits_for_no_timer_once_it_unwinds():
    # A held timer keeps a deadlock from being declared until its call came;
    # the unwinding of the deadlock then waits for no timer added during it.
    calls, box = [], {}

    def main():
        q = box["q"] = parataxis.TimerQueue(executor=parataxis.scheduler())
        q.add(0.02, lambda aborted: calls.append("early"))
        ev = parataxis.Event()
        with pytest.raises(parataxis.Cancelled):
            ev.wait()                           # nobody sets it: the unwinding
        q.add(60, calls.append)                 # no hold any more
    t0 = time.monotonic()
    with pytest.raises(parataxis.DeadlockError):
        parataxis.run(main)
    assert time.monotonic() - t0 < 30
    assert calls == ["early"]
    box["q"].close()
    assert calls == ["early", True]


def test_scheduler_is_enofiber_outside_a_run_and_a_bad_executor_is_refused():
    with pytest.raises(parataxis.NoFiberError):
        parataxis.scheduler()
    with pytest.raises(TypeError, match="executor"):
        parataxis.TimerQueue(executor={})
    with pytest.raises(TypeError, match="executor"):
        parataxis.TimerQueue(executor=5)
    with parataxis.TimerQueue(executor=None):   # no executor: a plain queue
        pass

    def main():
        s = parataxis.scheduler()
        assert s is parataxis.scheduler()
        assert isinstance(s, parataxis.Scheduler)
        with parataxis.TimerQueue(executor=s):
            pass
    parataxis.run(main)


# -- dropped without close (the Lua suite's gc_spec.lua) ----------------------

def _drop_queue(setup):
    """Makes a TimerQueue in a frame of its own and drops it there; setup(q)
    adds its timers.  Returns a weak reference to the queue."""
    q = parataxis.TimerQueue()
    setup(q)
    ref = weakref.ref(q)
    del q
    return ref


# A dropped queue's worker is joined by a reaper thread (the drop may come
# where the worker cannot be waited for): its owed calls come soon, not before
# the drop returns.  The tests wait for them on this condition.
_delivered = threading.Condition()


def _delivery(fn):
    def call(aborted):
        with _delivered:
            try:
                return fn(aborted)
            finally:
                _delivered.notify_all()
    return call


def _wait_delivered(pred):
    with _delivered:
        assert _delivered.wait_for(pred, TIMEOUT), "the owed calls did not come"


def test_dropped_without_close_delivers_every_owed_call_as_aborted_when_collected():
    calls = []
    lock = threading.Lock()

    def rec(name):
        @_delivery
        def fn(aborted):
            with lock:
                calls.append((name, aborted))
        return fn

    def setup(q):
        for i in range(1, 4):
            q.add(60, rec(f"once{i}"))
        q.add_periodic(60, 1, rec("periodic"))
    ref = _drop_queue(setup)
    gc.collect()
    assert ref() is None, "the queue was not collected"
    _wait_delivered(lambda: len(calls) >= 4)
    assert sorted(calls) == [("once1", True), ("once2", True), ("once3", True),
                             ("periodic", True)]
    gc.collect()
    assert len(calls) == 4                      # once each, not again


def test_dropped_without_close_is_collected_although_its_handlers_capture_it_a_cycle():
    calls = [0]

    def setup(q):
        for _ in range(4):
            @_delivery
            def fn(aborted, q=q):               # the queue, from its own handler
                assert q.closed
                if aborted:
                    calls[0] += 1
            q.add(60, fn)
    ref = _drop_queue(setup)
    gc.collect()
    leaked = ref()
    if leaked is not None:                      # close it, not to leave its worker behind
        leaked.close()
        del leaked
        pytest.fail("the queue was not collected")
    _wait_delivered(lambda: calls[0] >= 4)
    assert calls[0] == 4


def test_dropped_without_close_reports_handler_errors_with_warn_and_still_runs_the_other_calls(
        unraisable):
    # Python reports them as every handler's exception: to sys.unraisablehook.
    calls = [0]

    @_delivery
    def boom(aborted):
        raise ZeroDivisionError("first boom")

    @_delivery
    def ok(aborted):
        calls[0] += 1

    def setup(q):
        q.add(60, boom)
        q.add(60, ok)
        q.add(60, boom)
        q.add(60, ok)
    ref = _drop_queue(setup)
    gc.collect()
    assert ref() is None
    _wait_delivered(lambda: calls[0] >= 2)
    assert calls[0] == 2
    with unraisable.cond:
        assert unraisable.cond.wait_for(lambda: len(unraisable) == 2, TIMEOUT)
    assert [u.exc_type for u in unraisable] == [ZeroDivisionError] * 2
    assert "first boom" in str(unraisable[0].exc_value)


def test_dropped_without_close_refuses_an_add_from_a_handler_run_at_collection(unraisable):
    refused, ran_later = [], []

    def setup(q):
        @_delivery
        def fn(aborted):
            try:
                q.add(0, lambda a: ran_later.append(a))
            except parataxis.Closed:
                refused.append(True)
        q.add(60, fn)
    ref = _drop_queue(setup)
    gc.collect()
    assert ref() is None
    _wait_delivered(lambda: refused)
    assert refused == [True]
    assert ran_later == []
    assert list(unraisable) == []


def test_dropped_without_close_kept_by_a_handler_at_collection_is_a_closed_queue_safe_to_use():
    kept = []

    def setup(q):
        q.add(60, _delivery(lambda aborted: kept.append(q)))
    _drop_queue(setup)
    gc.collect()
    _wait_delivered(lambda: kept)
    assert len(kept) == 1, "the handler did not run"
    gc.collect()
    q = kept.pop()
    assert q.closed
    for call in (lambda: q.pending, q.cancel_all, lambda: q.add(0, lambda a: None),
                 lambda: q.add_periodic(0, 1, lambda a: None)):
        with pytest.raises(parataxis.Closed):
            call()
    q.close()
    del q
    gc.collect()


def test_dropped_without_close_closed_before_it_was_dropped_calls_nothing_again():
    calls = [0]

    def setup(q):
        q.add(60, lambda aborted: calls.__setitem__(0, calls[0] + 1))
        q.close()
    _drop_queue(setup)
    assert calls[0] == 1
    gc.collect()
    assert calls[0] == 1
