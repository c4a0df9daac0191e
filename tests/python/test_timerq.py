"""TimerQueue and Timer on the worker thread: exactly-once, cancel, periodic, bad input."""
import math
import threading
import time

import pytest

import parataxis
from conftest import TIMEOUT, Recorder


def test_one_shot_fires_once_not_early(rec):
    with parataxis.TimerQueue() as q:
        t0 = time.monotonic()
        tid = q.add(0.05, rec)
        assert isinstance(tid, parataxis.TimerHandle)
        rec.wait_for(1)
        assert time.monotonic() - t0 >= 0.05
        assert rec.calls == [False]
        assert rec.threads[0] != threading.get_ident()   # the worker thread
    assert rec.calls == [False]


def test_cancel_before_expiry(rec):
    with parataxis.TimerQueue() as q:
        tid = q.add(60, rec)
        assert q.pending == 1
        assert q.cancel(tid) is True
        assert rec.wait_for(1) == [True]
        assert q.cancel(tid) is False
        with pytest.raises(TypeError):
            q.cancel(123456789)              # not a handle
        assert q.pending == 0


def test_ids_unique():
    with parataxis.TimerQueue() as q:
        ids = [q.add(60, lambda a: None) for _ in range(1000)]
        assert len(set(ids)) == 1000 and 0 not in ids
        assert q.cancel_all() == 1000


def test_free_aborts_every_pending_timer_before_it_returns(rec):
    q = parataxis.TimerQueue()
    for _ in range(5):
        q.add(60, rec)
    q.close()
    assert rec.calls == [True] * 5       # delivered before close returns
    q.close()                            # idempotent


def test_exactly_once_storm():
    """Several Python threads add and cancel; every handler runs exactly once."""
    n_threads, per_thread = 4, 2000
    counts = {}
    lock = threading.Lock()
    done = threading.Event()
    total = n_threads * per_thread
    cancelled_ok = [0]

    def handler_for(key):
        def h(aborted):
            with lock:
                counts[key] = counts.get(key, 0) + 1
                if len(counts) == total:
                    done.set()
        return h

    q = parataxis.TimerQueue()

    def worker(t):
        for i in range(per_thread):
            tid = q.add((i % 7) * 0.0005, handler_for((t, i)))
            if i % 2 and q.cancel(tid):
                with lock:
                    cancelled_ok[0] += 1

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(n_threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert done.wait(TIMEOUT)
    q.close()
    assert len(counts) == total
    assert set(counts.values()) == {1}


def test_periodic_ticks_then_one_final_call():
    calls = []
    three = threading.Event()
    final = threading.Event()

    def tick(aborted):
        calls.append(aborted)
        if aborted:
            final.set()
        elif len(calls) == 3:
            three.set()

    with parataxis.TimerQueue() as q:
        tid = q.add_periodic(0.001, 0.005, tick)
        assert three.wait(TIMEOUT)
        assert q.cancel(tid) is True
        assert final.wait(TIMEOUT)
        time.sleep(0.03)          # would show an extra tick, if any
    assert calls[-1] is True and calls.count(True) == 1
    assert all(c is False for c in calls[:-1]) and len(calls) >= 4


def test_free_ends_periodic(rec):
    q = parataxis.TimerQueue()
    q.add_periodic(60, 1, rec)
    q.close()
    assert rec.calls == [True]
    # A fast periodic timer under close (periodic_ticks.c): one final call,
    # no tick after it, no two calls at once.
    calls, busy, overlaps, after_final = [], [False], [0], [0]
    five = threading.Event()

    def tick(aborted):
        if busy[0]:
            overlaps[0] += 1
        busy[0] = True
        if True in calls:
            after_final[0] += 1
        calls.append(aborted)
        if len(calls) == 5:
            five.set()
        busy[0] = False

    q = parataxis.TimerQueue()
    q.add_periodic(0, 0.0002, tick)
    assert five.wait(TIMEOUT)
    q.close()
    assert calls.count(True) == 1 and calls[-1] is True
    assert after_final[0] == 0 and overlaps[0] == 0


def test_handler_may_cancel_and_add_on_same_queue(rec):
    with parataxis.TimerQueue() as q:
        other = q.add(60, rec)

        def h(aborted):
            assert q.cancel(other)
            q.add(0, rec)

        q.add(0, h)
        calls = rec.wait_for(2)
        assert sorted(calls) == [False, True]


def test_free_from_its_own_handler_returns_and_delivers_the_rest_once(rec):
    q = parataxis.TimerQueue()
    q.add(60, rec)
    closed = threading.Event()

    def h(aborted):
        q.close()
        closed.set()

    q.add(0, h)
    assert closed.wait(TIMEOUT)
    assert rec.wait_for(1) == [True]
    with pytest.raises(parataxis.Closed):
        q.add(0, rec)


def test_exception_goes_to_unraisablehook_and_worker_survives(unraisable, rec):
    def bad(aborted):
        raise ZeroDivisionError("boom")

    with parataxis.TimerQueue() as q:
        q.add(0, bad)
        with unraisable.cond:
            assert unraisable.cond.wait_for(lambda: unraisable, TIMEOUT)
        assert unraisable[0].exc_type is ZeroDivisionError
        q.add(0, rec)                          # the worker still runs handlers
        assert rec.wait_for(1) == [False]


def test_exceptions_in_one_batch_each_reported_and_the_rest_still_run(unraisable):
    # 300 timers due together reach Python as one batch (see run_keys, _timers.c):
    # every third raises; every handler still runs once, every raise is reported.
    ran = []
    done = threading.Event()

    def make(i):
        def fn(aborted):
            ran.append(i)
            if len(ran) == 300:
                done.set()
            if i % 3 == 0:
                raise ZeroDivisionError(i)
        return fn

    with parataxis.TimerQueue() as q:
        deadline = 0.05
        for i in range(300):
            q.add(deadline, make(i))
        assert done.wait(TIMEOUT)
        with unraisable.cond:
            assert unraisable.cond.wait_for(lambda: len(unraisable) == 100, TIMEOUT)
    assert sorted(ran) == list(range(300))
    assert all(u.exc_type is ZeroDivisionError for u in unraisable)


def test_bad_input(rec):
    with parataxis.TimerQueue() as q:
        with pytest.raises(TypeError):
            q.add(1, None)
        with pytest.raises(TypeError):
            q.add("1", rec)
        for bad in (-1, -0.001, math.nan, -math.inf, -1e300):
            with pytest.raises(ValueError):
                q.add(bad, rec)
            with pytest.raises(ValueError):
                q.add_periodic(bad, 1, rec)
        with pytest.raises(ValueError):
            q.add_periodic(0, 0, rec)
        with pytest.raises(ValueError):
            q.add_periodic(0, -1, rec)
        with pytest.raises(TypeError):
            q.add_periodic(0, 1, 42)
        with pytest.raises(TypeError):
            q.cancel(-5)
        assert q.pending == 0
        h = q.add(60, rec)
    with pytest.raises(parataxis.Closed):
        q.add(0, rec)
    with pytest.raises(RuntimeError):          # Closed is a RuntimeError
        q.add_periodic(0, 1, rec)
    with pytest.raises(parataxis.Error):
        q.cancel(h)
    with pytest.raises(TypeError):
        parataxis.TimerQueue(executor=42)
    assert rec.calls == [True]                 # h, aborted by close


def test_a_delay_past_int64_nanoseconds_means_never(rec):
    # C's rule (issue 18): a duration whose deadline passes INT64_MAX ns
    # saturates to "never" -- one whose nanoseconds fit int64_t, one of 2**63
    # ns or more (about 9223372036.85 s, 292 years) and infinity alike.
    longest, too_long = 9223372036.0, 9223372037.0
    with parataxis.TimerQueue() as q:
        t = parataxis.Timer(q)
        hs = [q.add(longest, rec), q.add_periodic(longest, longest, rec)]
        assert t.expires_after(longest) == 0
        for d in (too_long, math.inf, 10**400):
            hs += [q.add(d, rec), q.add_periodic(d, 1, rec), q.add_periodic(60, d, rec)]
            assert t.expires_after(d) == 0
        assert q.pending == len(hs) == 11
        assert rec.calls == []
        assert all(h.cancel() for h in hs)
        assert rec.wait_for(11) == [True] * 11


def test_error_hierarchy():
    assert issubclass(parataxis.InvalidArgument, ValueError)
    assert issubclass(parataxis.NoMemory, MemoryError)
    assert issubclass(parataxis.Closed, RuntimeError)
    for cls in (parataxis.InvalidArgument, parataxis.NoMemory, parataxis.Closed,
                parataxis.ForkedError):
        assert issubclass(cls, parataxis.Error)
    assert issubclass(parataxis.ForkedError, parataxis.Closed)
    assert "closed" in str(parataxis.Closed()).lower()


def test_only_exceptions_a_call_can_raise_are_exported():
    # One class per C code that some call of the binding returns, each named
    # parataxis.X and under parataxis.Error; nothing else.
    exported = {n for n in parataxis.__all__
                if isinstance(getattr(parataxis, n), type)
                and issubclass(getattr(parataxis, n), BaseException)}
    assert exported == {"Error", "InvalidArgument", "NoMemory", "Closed", "ForkedError",
                        "Timeout", "Cancelled", "DeadlockError", "OwnerDiedError",
                        "NotOwnerError", "NoFiberError", "BusyError", "WrongSchedulerError"}
    for name in exported:
        cls = getattr(parataxis, name)
        assert issubclass(cls, parataxis.Error) and cls.__module__ == "parataxis"
    assert issubclass(parataxis.Timeout, TimeoutError)
    assert issubclass(parataxis.Cancelled, Exception)   # `except Exception` sees it


def test_every_code_of_the_header_raises_its_own_exception():
    # The header's codes by their names (px_errname, -1 down to the first it
    # does not know): each raises the class whose code it is, but the two the
    # binding acts on itself and never raises (a park, a signal).
    from parataxis._errors import raise_for
    from parataxis._parataxis import ffi, lib
    names = {}
    code = -1
    while (name := ffi.string(lib.px_errname(code)).decode()) != "EUNKNOWN":
        names[code] = name
        code -= 1
    assert len(names) >= 14 and names[lib.PX_EINVAL] == "EINVAL"
    for code, name in names.items():
        if name in ("EYIELD", "EINTR"):
            continue
        with pytest.raises(parataxis.Error) as info:
            raise_for(code)
        assert type(info.value) is not parataxis.Error, name
        assert info.value.code == code == getattr(lib, "PX_" + name), name


def test_timer_waiters_fire_together(rec):
    with parataxis.TimerQueue() as q:
        t = parataxis.Timer(q)
        assert t.expires_after(0.02) == 0
        t.async_wait(rec)
        t.async_wait(rec)
        assert rec.wait_for(2) == [False, False]
        assert t.expiry <= parataxis.now()


def test_timer_reset_and_cancel_abort_waits(rec):
    with parataxis.TimerQueue() as q:
        t = parataxis.Timer(q)
        t.expires_after(60)
        t.async_wait(rec)
        t.async_wait(rec)
        assert t.expires_after(60) == 2      # reset aborts the two waits
        assert rec.wait_for(2) == [True, True]
        t.async_wait(rec)
        assert t.cancel() == 1
        assert rec.wait_for(3)[2] is True
        t.async_wait(rec)
        with pytest.raises(ValueError):
            t.expires_after(-1)
        with pytest.raises(TypeError):
            t.async_wait("nope")
    # closing the queue aborted the last wait
    assert rec.calls == [True, True, True, True]


def test_gil_released_while_blocking_in_c():
    """px_queue_wait blocks in C; another Python thread must keep running."""
    hq = parataxis.HandlerQueue()
    ticks = []
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            ticks.append(1)
            time.sleep(0.001)

    th = threading.Thread(target=spin)
    th.start()
    t0 = time.monotonic()
    assert hq.wait(0.3) is False
    stop.set()
    th.join()
    assert time.monotonic() - t0 >= 0.29
    assert len(ticks) > 20
    hq.close()
