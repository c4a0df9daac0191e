"""TimerQueue and Timer on the worker thread: exactly-once, cancel, periodic, bad input."""
import math
import random
import select
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


def test_ids_never_reused():
    with parataxis.TimerQueue() as q:
        ids = [q.add(60, lambda a: None) for _ in range(1000)]
        assert len(set(ids)) == 1000 and 0 not in ids
        assert q.cancel_all() == 1000
        # Rounds that fire or cancel, recycling the records: no id repeats, and
        # a stale handle never cancels the timer that now holds its record.
        seen = set(ids)
        for r in range(10):
            fire = r % 2 == 0
            rec = Recorder()
            cur = [q.add(0 if fire else 60, rec) for _ in range(200)]
            if not fire:
                assert not any(q.cancel(h) for h in ids)
                assert q.pending == 200
                assert q.cancel_all() == 200
            assert rec.wait_for(200) == [not fire] * 200
            assert seen.isdisjoint(cur) and len(set(cur)) == 200
            seen.update(cur)
            ids += cur


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


def test_a_handler_cancels_another_timer(rec):
    with parataxis.TimerQueue() as q:
        other = q.add(60, rec)
        fresh = []

        def h(aborted):
            assert q.cancel(other)
            q.add(0, rec)
            f = q.add(60, rec)                  # one it just added, too
            fresh.append(q.cancel(f))

        q.add(0, h)
        calls = rec.wait_for(3)
        assert sorted(calls) == [False, True, True]
        assert fresh == [True]
        assert q.cancel(other) is False         # already cancelled


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


def test_bad_adds_are_refused(rec):
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
        assert q.pending == 0
        h = q.add(60, rec)
    with pytest.raises(parataxis.Closed):
        q.add(0, rec)
    with pytest.raises(RuntimeError):          # Closed is a RuntimeError
        q.add_periodic(0, 1, rec)
    with pytest.raises(TypeError):
        parataxis.TimerQueue(executor=42)
    assert rec.calls == [True]                 # h, aborted by close; no refused one ran


def test_bad_ids_are_refused(rec):
    with parataxis.TimerQueue() as q:
        with pytest.raises(TypeError):
            q.cancel(-5)
        with pytest.raises(TypeError):
            q.cancel(0)
        fired = q.add(0, rec)                  # stale after firing
        assert rec.wait_for(1) == [False]
        assert q.cancel(fired) is False
        cancelled = q.add(10, rec)
        assert cancelled != fired
        assert q.cancel(cancelled) is True
        assert rec.wait_for(2) == [False, True]
        assert q.cancel(cancelled) is False    # stale after cancel
        assert q.cancel(fired) is False
        with parataxis.TimerQueue() as other:  # another queue's handle misses
            h = other.add(60, rec)
            assert q.cancel(h) is False
            assert other.pending == 1
        assert rec.wait_for(3) == [False, True, True]
        assert q.pending == 0
        h = q.add(60, rec)
    with pytest.raises(parataxis.Error):
        q.cancel(h)
    assert rec.calls == [False, True, True, True]


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
                        "NotOwnerError", "NoFiberError", "BusyError", "WrongSchedulerError",
                        "ClosedResourceError", "NotSupportedError"}
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


# -- mirrors of the C suite (tests/c/timerq/): one test per C spec ----------


def test_default_worker(rec):
    q = parataxis.TimerQueue()
    q.add(0, rec)
    rec.wait_for(1)
    assert rec.threads[0] != threading.get_ident()
    q.close()
    assert rec.calls == [False]


def test_drainable_queue():
    calls = []
    with parataxis.HandlerQueue() as hq, parataxis.TimerQueue(executor=hq) as q:
        fd = hq.fileno()
        assert fd >= 0 and select.select([fd], [], [], 0)[0] == []
        assert hq.wait(0) is False
        for i in range(5):
            q.add(0.0001 * i, lambda a, i=i: calls.append((i, a, threading.get_ident())))
        _await_len(hq, 5)
        assert select.select([fd], [], [], 0)[0] == [fd]
        assert hq.wait(0) is True
        assert calls == []                      # nothing runs outside a drain
        assert hq.drain(2) == 2
        assert select.select([fd], [], [], 0)[0] == [fd]   # the budget left three behind
        assert len(hq) == 3
        assert hq.drain() == 3
        assert select.select([fd], [], [], 0)[0] == []
        assert hq.drain() == 0
        assert sorted(c[0] for c in calls) == list(range(5))
        assert all(not a and th == threading.get_ident() for _, a, th in calls)
        # Cancel wins while the expired handler waits in the queue.
        late = []
        h = q.add(0, late.append)
        _await_len(hq, 1)
        assert q.cancel(h) is True
        assert q.cancel(h) is False
        assert late == []
        assert hq.drain() == 1
        assert late == [True]


def _await_len(hq, n):
    end = time.monotonic() + TIMEOUT
    while len(hq) < n and time.monotonic() < end:
        hq.wait(0.01)
    assert len(hq) == n


def test_sub_tick_delays_never_fire_early():
    n = 300
    done = threading.Event()
    seen = []

    def make(deadline):
        def fn(aborted):
            seen.append((parataxis.now(), deadline, aborted))
            if len(seen) == n:
                done.set()
        return fn

    with parataxis.TimerQueue() as q:
        for i in range(n):
            delay = (i * 7919 % 200) * 1e-6        # under 200 us
            q.add(delay, make(parataxis.now() + delay))
        assert done.wait(TIMEOUT)
    assert len(seen) == n
    assert all(at >= deadline - 1e-9 and not a for at, deadline, a in seen)


def test_fires_in_deadline_order():
    order = []
    done = threading.Event()
    with parataxis.TimerQueue() as q:
        for d in (0.03, 0.01, 0.02):
            q.add(d, lambda a, d=d: (order.append(d), len(order) == 3 and done.set()))
        assert done.wait(TIMEOUT)
    assert order == [0.01, 0.02, 0.03]


def test_cancel_all_aborts_every_pending_timer(rec):
    with parataxis.TimerQueue() as q:
        for _ in range(100):
            q.add(60, rec)
        assert q.pending == 100
        assert q.cancel_all() == 100
        assert q.pending == 0
        assert rec.wait_for(100) == [True] * 100
        assert q.cancel_all() == 0


def test_a_handler_adds_a_chain_of_timers():
    depth = [0]
    done = threading.Event()
    with parataxis.TimerQueue() as q:
        def link(aborted):
            assert not aborted
            depth[0] += 1
            if depth[0] == 50:
                done.set()
            else:
                q.add(depth[0] % 3 * 0.0001, link)

        q.add(0, link)
        assert done.wait(TIMEOUT)
    assert depth[0] == 50


def test_a_handler_cancels_itself(rec):
    with parataxis.TimerQueue() as q:
        known = threading.Event()
        me = []
        rcs = []

        def h(aborted):
            assert known.wait(TIMEOUT)
            rcs.append(q.cancel(me[0]))
            rec(aborted)

        me.append(q.add(0, h))
        known.set()
        assert rec.wait_for(1) == [False]
        q.add(0, rec)                          # a second call would come before it
        assert rec.wait_for(2) == [False, False]
        assert rcs == [False]


def test_cancel_all_inside_a_handler_counts_the_others(rec):
    seen = []
    done = threading.Event()
    with parataxis.TimerQueue() as q:
        assert q.pending == 0
        for i in range(3):
            q.add(10 + i, rec)
        assert q.pending == 3

        def sweeper(aborted):
            seen.extend((q.pending, q.cancel_all(), aborted))
            done.set()

        q.add(0, sweeper)
        assert done.wait(TIMEOUT)
        assert rec.wait_for(3) == [True] * 3
        assert seen == [3, 3, False]            # the running sweeper is neither
        assert q.pending == 0


def test_cancelling_a_running_handler_returns_0(rec):
    running, go = threading.Event(), threading.Event()

    def blocker(aborted):
        running.set()
        assert go.wait(TIMEOUT)
        rec(aborted)

    q = parataxis.TimerQueue()
    h = q.add(0, blocker)
    assert running.wait(TIMEOUT)
    assert q.cancel(h) is False
    assert q.cancel_all() == 0
    go.set()
    assert rec.wait_for(1) == [False]
    q.close()                                  # and it is not called again
    assert rec.calls == [False]


def test_a_tick_may_cancel_its_timer():
    started, go, final = threading.Event(), threading.Event(), threading.Event()
    ticks, finals, overlapped = [0], [0], [0]
    in_tick = threading.Event()

    def tick(aborted):
        if aborted:
            if in_tick.is_set():
                overlapped[0] += 1
            finals[0] += 1
            final.set()
            return
        in_tick.set()
        ticks[0] += 1
        if ticks[0] == 3:
            started.set()
            assert go.wait(TIMEOUT)
        in_tick.clear()

    with parataxis.TimerQueue() as q:
        h = q.add_periodic(0, 0.005, tick)
        assert started.wait(TIMEOUT)
        assert q.cancel(h) is True              # wins while the tick runs
        assert q.cancel(h) is False
        assert not final.is_set()               # the final call waits for the tick
        go.set()
        assert final.wait(TIMEOUT)
        time.sleep(0.05)                        # negative check: nothing follows
    assert finals == [1] and overlapped == [0] and ticks == [3]


def test_periodic_cancel_while_it_ticks():
    with parataxis.TimerQueue() as q:
        for _ in range(100):
            first, final = threading.Event(), threading.Event()
            st = {"ticks": 0, "finals": 0, "after": 0}

            def tick(aborted, st=st, first=first, final=final):
                if aborted:
                    st["finals"] += 1
                    final.set()
                    return
                if st["finals"]:
                    st["after"] += 1
                st["ticks"] += 1
                first.set()

            h = q.add_periodic(0, 1e-6, tick)
            assert first.wait(TIMEOUT)
            assert q.cancel(h) is True
            assert final.wait(TIMEOUT)
            assert q.cancel(h) is False
            assert st["finals"] == 1 and st["after"] == 0


def test_ticks_keep_their_phase():
    # A 250 ms period; the third tick outlasts 1.6 periods: the tick it
    # missed is skipped, the others start on their phase (within 100 ms: a
    # loaded machine starts a thread that late).
    p, late_max, long_tick = 0.25, 0.1, 2
    at, finals = [], []
    seven, final = threading.Event(), threading.Event()
    busy = threading.Lock()
    overlaps = [0]

    def tick(aborted):
        if not busy.acquire(blocking=False):
            overlaps[0] += 1
            return
        try:
            if aborted:
                finals.append(True)
                final.set()
                return
            at.append(parataxis.now())
            if len(at) == long_tick + 1:
                time.sleep(p * 1.6)             # outlast the period: a tick is missed
            if len(at) == 7:
                seven.set()
        finally:
            busy.release()

    with parataxis.TimerQueue() as q:
        base = parataxis.now() + p              # <= the true first deadline
        h = q.add_periodic(p, p, tick)
        assert seven.wait(TIMEOUT)
        assert q.cancel(h) is True
        assert final.wait(TIMEOUT)
        n = len(at)
        time.sleep(3 * p)                       # negative check: no tick after the final call
        assert len(at) == n and finals == [True] and overlaps == [0]
    prev = -1
    for i, t in enumerate(at):
        k, off = divmod(t - base, p)
        assert t - base >= 0                    # never early
        assert k > prev
        assert off < late_max, f"tick {i} starts {off:.3f} s after its phase"
        if i == long_tick + 1:
            assert k >= long_tick + 2           # the missed tick was skipped
        prev = k


def test_many_cancels_while_the_worker_is_held():
    n = 5000
    held, release = threading.Event(), threading.Event()
    calls = [0] * n
    aborted = [0] * n

    def hold(a):
        held.set()
        assert release.wait(TIMEOUT)

    def make(i):
        def fn(a):
            calls[i] += 1
            aborted[i] += a
        return fn

    q = parataxis.TimerQueue()
    q.add(0, hold)
    assert held.wait(TIMEOUT)
    hs = [q.add(60, make(i)) for i in range(n)]
    assert q.pending == n
    for i in range(n):
        h = hs[i * 7919 % n]                    # not in add order
        assert q.cancel(h) is True
        assert q.cancel(h) is False             # once only
    assert q.pending == 0
    assert sum(calls) == 0                      # the worker is still held
    release.set()
    q.close()
    assert calls == [1] * n and aborted == [1] * n


def test_cancel_all_against_single_cancels():
    n = 2000
    calls, aborted = [0] * n, [0] * n
    lock = threading.Lock()

    def make(i):
        def fn(a):
            with lock:
                calls[i] += 1
                aborted[i] += a
        return fn

    q = parataxis.TimerQueue()
    hs = [q.add(60, make(i)) for i in range(n)]
    go = threading.Event()
    single = [0]

    def each():
        assert go.wait(TIMEOUT)
        single[0] = sum(q.cancel(hs[i * 31 % n]) for i in range(n))

    th = threading.Thread(target=each)
    th.start()
    go.set()
    all_wins = q.cancel_all()
    th.join()
    assert all_wins + single[0] == n
    assert q.pending == 0
    q.close()
    assert calls == [1] * n and aborted == [1] * n


def test_single_cancels_around_the_sleep():
    rounds = 300
    came = threading.Semaphore(0)
    aborted = []
    rng = random.Random(42)
    with parataxis.TimerQueue() as q:
        q.add(3600, lambda a: None)             # the worker has a far deadline
        for i in range(rounds):
            h = q.add(3600, lambda a: (aborted.append(a), came.release()))
            r = rng.randrange(4)
            if r:                               # jitter, not synchronization
                time.sleep(rng.random() * 40e-6 * r)
            assert q.cancel(h) is True
            assert q.pending == 1
            assert came.acquire(timeout=TIMEOUT), f"round {i}: the aborted call did not come"
        assert aborted == [True] * rounds


def test_bursts_from_three_threads():
    burst, rounds, cancellers = 1000, 5, 3
    with parataxis.TimerQueue() as q:
        q.add(3600, lambda a: None)
        for r in range(rounds):
            calls = [0] * burst
            aborted = [0] * burst
            wins = [0] * burst
            lock = threading.Lock()
            done = threading.Semaphore(0)

            def make(i):
                def fn(a):
                    with lock:
                        calls[i] += 1
                        aborted[i] += a
                    done.release()
                return fn

            hs = [q.add(3600, make(i)) for i in range(burst)]
            assert q.pending == burst + 1
            go = threading.Event()

            def canceller(t):
                assert go.wait(TIMEOUT)
                for k in range(burst):          # two threads per id
                    i = (k * 7919 + t * 1013) % burst
                    if i % cancellers not in (t, (t + 1) % cancellers):
                        continue
                    if q.cancel(hs[i]):
                        with lock:
                            wins[i] += 1

            ths = [threading.Thread(target=canceller, args=(t,)) for t in range(cancellers)]
            for th in ths:
                th.start()
            go.set()
            for th in ths:
                th.join()
            assert q.pending == 1               # every cancel has returned
            for _ in range(burst):
                assert done.acquire(timeout=TIMEOUT), f"round {r}: a call did not come"
            assert wins == [1] * burst and calls == [1] * burst and aborted == [1] * burst


def test_periodic_rearm_against_cancels():
    n = 200
    st = [{"ticks": 0, "finals": 0, "after": 0, "wins": 0} for _ in range(n)]
    lock = threading.Lock()
    finals = threading.Semaphore(0)
    hs = [None] * n
    all_wins = [0]

    def make(i):
        def fn(aborted):
            s = st[i]
            if aborted:
                s["finals"] += 1
                finals.release()
                return
            if s["finals"]:
                s["after"] += 1
            s["ticks"] += 1
            if s["ticks"] == 20:                # a tick cancels another timer
                j = (i * 101 + 7) % n
                if hs[j] is not None and q.cancel(hs[j]):   # not yet added: C's id 0
                    with lock:
                        st[j]["wins"] += 1
        return fn

    q = parataxis.TimerQueue()
    q.add(3600, lambda a: None)
    for i in range(n):
        hs[i] = q.add_periodic((i % 50) * 1e-6, (2 + i % 5) * 1e-6, make(i))
    go = threading.Event()

    def canceller(t):
        assert go.wait(TIMEOUT)
        for k in range(n):
            i = (k * 331 + t * 97) % n
            if k % 8 == 0:
                time.sleep(30e-6)               # pace: let ticks run between cancels
            if q.cancel(hs[i]):
                with lock:
                    st[i]["wins"] += 1

    def cancel_all():
        assert go.wait(TIMEOUT)
        for _ in range(20):
            time.sleep(200e-6)
            all_wins[0] += q.cancel_all()

    ths = [threading.Thread(target=canceller, args=(0,)),
           threading.Thread(target=canceller, args=(1,)),
           threading.Thread(target=cancel_all)]
    for th in ths:
        th.start()
    go.set()
    for th in ths:
        th.join()
    all_wins[0] += q.cancel_all()               # whatever is left
    for _ in range(n):
        assert finals.acquire(timeout=TIMEOUT)
    assert q.pending == 0                       # the far one was cancelled too
    for s in st:
        assert s["wins"] <= 1 and s["finals"] == 1 and s["after"] == 0
    assert sum(s["wins"] for s in st) + all_wins[0] == n + 1
    q.close()
    assert all(s["finals"] == 1 for s in st)


def test_periodic_ticks_and_the_final_aborted_call_are_fibers():
    px = parataxis
    ticks, final = [0], [None]

    def main():
        q = px.TimerQueue(executor=px.scheduler())
        three = px.Event()

        def tick(aborted):
            assert px.current_id() != 0
            if aborted:
                final[0] = px.current_id()
                return
            ticks[0] += 1
            px.yield_()                         # a handler may wait
            if ticks[0] == 3:
                three.set()

        h = q.add_periodic(0.005, 0.005, tick)
        three.wait()
        assert q.cancel(h) is True
        # main ends here: the run is held until the final call ran

    px.run(main)
    assert ticks[0] >= 3
    assert final[0] not in (None, 0)


def test_a_timer_of_2_63_ns_or_more_never_fires_and_is_cancellable():
    # On the scheduler as on a plain queue (test_durations.py): the timer holds
    # the run until its cancel's aborted call, a fiber, has started.
    px = parataxis
    seen = []

    def main():
        q = px.TimerQueue(executor=px.scheduler())
        hs = [q.add(s, seen.append) for s in (9223372037.0, 1e300, math.inf)]
        px.sleep(0.05)
        assert seen == []
        assert q.pending == 3
        assert all(q.cancel(h) for h in hs)

    px.run(main)
    assert seen == [True, True, True]


def test_a_fresh_timer_has_expired_already(rec):
    with parataxis.TimerQueue() as q:
        t = parataxis.Timer(q)
        assert t.expiry <= parataxis.now()
        t.async_wait(rec)
        t.async_wait(rec)
        assert rec.wait_for(2) == [False, False]


def test_timer_free_aborts_its_waits(rec):
    # Waits after a cancel still wait for the kept expiry; close (the
    # binding's px_timer_free) aborts them.
    with parataxis.TimerQueue() as q:
        t = parataxis.Timer(q)
        assert t.expires_after(10) == 0
        assert t.cancel() == 0
        for _ in range(5):
            t.async_wait(rec)
        assert rec.calls == []
        t.close()
        assert rec.wait_for(5) == [True] * 5
        t.close()                               # twice is harmless


def test_timer_bad_input_is_refused(rec):
    with pytest.raises(TypeError):
        parataxis.Timer(None)
    with pytest.raises(TypeError):
        parataxis.Timer(42)
    with parataxis.TimerQueue() as q:
        t = parataxis.Timer(q)
        for bad in (-1, -1e-9, math.nan):
            with pytest.raises(ValueError):
                t.expires_after(bad)
        with pytest.raises(TypeError):
            t.expires_after("1")
        with pytest.raises(TypeError):
            t.async_wait(None)
        with pytest.raises(TypeError):
            t.async_wait("nope")
        t.close()
    assert rec.calls == []
