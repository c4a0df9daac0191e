"""Lifecycles under attack: close() racing other threads, queues dropped without
close(), timer handles that belong to one queue, an asyncio loop closed under its
queue (issue 9, Python items 8, 9, 12 and 13).

The races run in a subprocess: on a broken build they crash the interpreter or
hang, and the test must report that instead of taking pytest down with it."""
import asyncio
import gc
import os
import subprocess
import sys
import textwrap
import threading
import time
import weakref

import pytest

import parataxis
from conftest import TIMEOUT, Recorder


def run_race(src, timeout=60):
    """Runs `src` in a fresh interpreter; it prints "ok" at the end.  glibc fills
    freed memory with junk (MALLOC_PERTURB_), so a use after free shows."""
    env = dict(os.environ, MALLOC_PERTURB_="165")
    try:
        r = subprocess.run([sys.executable, "-c", textwrap.dedent(src)], env=env,
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail("the race hung")
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stderr[-3000:]}"
    assert r.stdout.split()[-1:] == ["ok"], r.stdout[-3000:] + r.stderr[-3000:]


def wait_until(pred, timeout=TIMEOUT):
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            return False
        time.sleep(0.001)
    return True


def threads_now():
    return len(os.listdir("/proc/self/task"))


def fds_now():
    return len(os.listdir("/proc/self/fd"))


# -- item 8: close() racing the other calls ------------------------------------

# The producers start together (a barrier) and close() comes once each of them is
# well into its loop (a semaphore), so every round closes in the middle of calls.
RACE_PRELUDE = """
import sys, threading, parataxis
PRODUCERS = 3
class Ctx:   # what one round of a race shares: make() makes it
    def __init__(self, **fields):
        self.__dict__.update(fields)
def race(rounds, make, body, close, check=lambda ctx: None):
    for _ in range(rounds):
        ctx = make()
        go = threading.Barrier(PRODUCERS + 1)
        busy = threading.Semaphore(0)
        errors = []
        def producer(k):
            go.wait()
            n = 0
            try:
                while True:
                    body(ctx, k, n)
                    n += 1
                    if n == 20:
                        busy.release()
            except parataxis.Closed:
                pass
            except BaseException as e:
                errors.append(repr(e))
            if n < 20:
                busy.release()
        ts = [threading.Thread(target=producer, args=(k,)) for k in range(PRODUCERS)]
        for t in ts:
            t.start()
        go.wait()
        for _ in ts:
            busy.acquire()
        close(ctx)
        for t in ts:
            t.join(20)
            if t.is_alive():
                print("a producer hung"); sys.stdout.flush(); import os; os._exit(3)
        assert not errors, errors
        check(ctx)
"""


def test_close_races_add_and_cancel_from_threads():
    """A `with` block exits while producer threads add and cancel: each call
    either works or raises Closed, and every added timer gets its one call."""
    run_race(RACE_PRELUDE + """
def make():
    c = Ctx(q=parataxis.TimerQueue(), calls=[], added=[0] * PRODUCERS)
    c.q.__enter__()
    return c
def body(c, k, n):
    h = c.q.add((n % 3) * 1e-4, c.calls.append)
    c.added[k] += 1
    if n % 2:
        c.q.cancel(h)
def close(c):
    c.q.__exit__(None, None, None)
    c.closed_calls = len(c.calls)
def check(c):
    # close() returned only after every call owed was delivered
    assert c.closed_calls == sum(c.added), (c.closed_calls, c.added)
race(150, make, body, close, check)
print("ok")
""")


def test_close_races_periodic_cancel_all_and_pending():
    run_race(RACE_PRELUDE + """
def make():
    return Ctx(q=parataxis.TimerQueue(), finals=[], added=[0] * PRODUCERS)
def body(c, k, n):
    op = n % 4
    if op == 0:
        c.q.add_periodic(0, 1e-4, lambda a: a and c.finals.append(a))
        c.added[k] += 1
    elif op == 1:
        c.q.cancel_all()
    elif op == 2:
        c.q.pending
    else:
        c.q.closed
def close(c):
    c.q.close()
def check(c):
    assert len(c.finals) == sum(c.added)
race(100, make, body, close, check)
print("ok")
""")


def test_close_races_timer_calls():
    """Timer creation, waits, resets and cancels race the queue's close() and the
    timer's own close()."""
    run_race(RACE_PRELUDE + """
def make():
    q = parataxis.TimerQueue()
    t = parataxis.Timer(q)
    t.expires_after(60)
    return Ctx(q=q, t=t, calls=[], waits=[0] * PRODUCERS)
def body(c, k, n):
    op = n % 5
    if op == 0:
        parataxis.Timer(c.q).close()
    elif op == 1:
        c.t.async_wait(c.calls.append)
        c.waits[k] += 1
    elif op == 2:
        c.t.expires_after(60)
    elif op == 3:
        c.t.expiry
    else:
        c.t.cancel()
def close_queue(c):
    c.q.close()
def close_timer_then_queue(c):
    c.t.close()
    c.q.close()
def check(c):
    assert len(c.calls) == sum(c.waits), (len(c.calls), c.waits)
race(60, make, body, close_queue, check)
race(60, make, body, close_timer_then_queue, check)
print("ok")
""")


def test_handler_queue_close_races_drain_wait_and_len():
    run_race(RACE_PRELUDE + """
def make():
    hq = parataxis.HandlerQueue()
    return Ctx(hq=hq, q=parataxis.TimerQueue(executor=hq), calls=[], added=[0])
def body(c, k, n):
    if k == 0:
        c.q.add(0, c.calls.append)
        c.added[0] += 1
    elif k == 1:
        c.hq.drain()
        len(c.hq)
    else:
        c.hq.wait(None if n % 2 else 0.001)
        c.hq.fileno()
def close(c):
    c.hq.close()                      # closes c.q first, then runs what is queued
def check(c):
    assert c.q.closed
    assert len(c.calls) == c.added[0], (len(c.calls), c.added)
race(100, make, body, close, check)
print("ok")
""")


def test_handler_queue_closed_from_a_handler_it_drains():
    """close() inside its own drain() cannot free the queue under that drain: it
    finishes when the drain returns; the rest of the calls are still delivered."""
    run_race("""
import parataxis
for _ in range(50):
    hq = parataxis.HandlerQueue()
    q = parataxis.TimerQueue(executor=hq)
    calls = []
    def closer(aborted):
        calls.append(("closer", aborted))
        hq.close()
        assert hq.closed
    other = lambda a: calls.append(("other", a))
    q.add(0, closer)
    while len(hq) < 1:
        hq.wait(10)
    for _ in range(200):              # more than one chunk of px_queue_drain
        q.add(0, other)
    for _ in range(5):
        q.add(60, other)
    while len(hq) < 201:
        hq.wait(0.001)
    hq.drain()
    assert q.closed and hq.closed
    assert calls[0] == ("closer", False), calls
    assert sorted(calls[1:]) == [("other", True)] * 205, calls
    try:
        hq.drain()
        raise SystemExit("drain after close did not raise")
    except parataxis.Closed:
        pass
print("ok")
""")


# -- item 9: a queue dropped without close() -----------------------------------

def test_dropped_loop_queue_is_closed_and_delivers():
    """With an asyncio loop as executor, dropping the queue used to leak its
    worker thread and eventfd and lose the owed calls."""
    loop = asyncio.new_event_loop()
    try:
        tasks0, fds0 = threads_now(), fds_now()
        rec = Recorder()
        q = parataxis.TimerQueue(executor=loop)
        q.add(60, rec)
        q.add_periodic(60, 1, rec)
        t = parataxis.Timer(q)
        t.expires_after(60)
        t.async_wait(rec)
        gone = weakref.ref(q)
        del q, t
        gc.collect()
        assert gone() is None
        assert rec.wait_for(3) == [True, True, True]
        assert rec.threads == [threading.get_ident()] * 3   # the loop is not running
        assert wait_until(lambda: threads_now() == tasks0), "the worker thread leaked"
        assert fds_now() == fds0, "the eventfd leaked"
    finally:
        loop.close()


def test_dropped_loop_queue_inside_the_running_loop():
    async def main():
        rec = Recorder()
        tasks0, fds0 = threads_now(), fds_now()
        q = parataxis.TimerQueue(executor=asyncio.get_running_loop())
        q.add(60, rec)
        del q
        gc.collect()
        for _ in range(int(TIMEOUT * 100)):
            if rec.calls:
                break
            await asyncio.sleep(0.01)
        assert rec.calls == [True]
        assert rec.threads == [threading.get_ident()]       # on the loop's thread
        assert wait_until(lambda: threads_now() == tasks0)
        assert fds_now() == fds0

    asyncio.run(main())


def test_dropped_loop_queue_from_another_thread_delivers_on_the_loop():
    async def main():
        rec = Recorder()
        loop = asyncio.get_running_loop()
        box = [parataxis.TimerQueue(executor=loop)]
        box[0].add(60, rec)
        dropper = threading.Thread(target=box.clear)
        dropper.start()
        while dropper.is_alive() or not rec.calls:
            assert len(rec.calls) < 2
            await asyncio.sleep(0.01)
        dropper.join()
        assert rec.calls == [True]
        assert rec.threads == [threading.get_ident()]

    asyncio.run(asyncio.wait_for(main(), TIMEOUT))


def test_dropped_queue_in_a_cycle_is_closed_by_the_collector():
    """A queue in a reference cycle is closed by its __del__ when the collector
    frees the cycle, and its gate (what close() shuts and waits on) is still
    there then.  The gate was an ffi.gc object, whose destructor is a finalizer
    the collector may run first: close() then shut freed memory and waited for
    ever (the hang seen once in test_dropped_loop_queue_is_closed_and_delivers,
    whose gc.collect() freed such a cycle left by an earlier test)."""
    run_race("""
import gc, os, threading, time, parataxis
def threads():
    return len(os.listdir("/proc/self/task"))
calls = []
fired = threading.Semaphore(0)
def fn(aborted):
    calls.append(aborted)
    fired.release()
base = threads()
for _ in range(20):
    q = parataxis.TimerQueue()
    box = [q]                   # the queue is reachable only through a later object
    del q
    # A pending call holds the queue's _State, which holds the gate: this
    # collection moves the gate ahead of the queue in the collector's list,
    # so the next one finalizes the gate's object first.
    h = box[0].add(60, fn)
    gc.collect()
    assert h.cancel()
    del h
    assert fired.acquire(timeout=10)
    box.append(parataxis.Timer(box[0]))     # its close() enters the queue's gate
    box.append(box)             # a cycle: only the collector frees it
    del box
    gc.collect()                # the queue's __del__ closes it
end = time.monotonic() + 10
while threads() != base and time.monotonic() < end:
    time.sleep(0.01)
assert threads() == base, "a dropped queue's worker thread is left"
assert calls == [True] * 20, calls
print("ok")
""")


def test_queue_collected_where_its_worker_waits_on_a_held_lock_does_not_hang():
    """The collector runs wherever an allocation triggers it, with whatever
    locks that thread holds: ThreadPoolExecutor.submit allocates the Future
    under its _shutdown_lock, on a queue's worker.  A dropped queue sharing
    that executor, collected there, must not join a worker that waits for the
    same lock (close() did: a hang, found with gc.set_threshold(1) and 300
    dropped queues).  Here the collection comes at a chosen moment: the other
    worker waits for the lock the collecting thread holds."""
    run_race("""
import concurrent.futures as cf, gc, threading, parataxis as px
gc.disable()
arrived = threading.Event()
first = []
rec = []
class Ex(cf.ThreadPoolExecutor):
    lock = threading.Lock()
    def submit(self, fn, *args, **kw):
        if not first:
            first.append(1)
            with self.lock:             # what submit's allocation may do here
                assert arrived.wait(10)
                gc.collect()
                return super().submit(fn, *args, **kw)
        arrived.set()
        with self.lock:
            return super().submit(fn, *args, **kw)
ex = Ex(2)
a = px.TimerQueue(ex)
b = px.TimerQueue(ex)
b.me = b                                # a cycle: only the collector frees it
a.add(0, rec.append)
b.add(0.05, rec.append)
owed = threading.Event()                # b's last call: aborted, by its reaper
b.add(60, lambda aborted: (rec.append(aborted), owed.set()))
del b
done = threading.Event()
a.add(0.2, lambda aborted: done.set())
assert done.wait(20)
assert owed.wait(20)
a.close()
ex.shutdown()
assert len(rec) == 3 and rec[0] is False, rec   # b's first: expired or aborted
print("ok")
""", timeout=40)


def test_queue_collected_on_its_own_worker_delivers_every_call():
    """A dropped queue may be collected on its own worker thread, outside its
    handlers (here in its executor's submit, as an allocation there may do):
    close() cannot join that worker, which still delivers the aborted calls
    through the queue's batch executor -- so the batch must live until then.
    close() took itself for off the worker and let the batch go at once: the
    worker wrote into freed memory (a corrupted heap) and calls were lost."""
    run_race("""
import concurrent.futures as cf, gc, threading, parataxis as px
gc.disable()
rec = []
got = threading.Condition()
def call(aborted):
    with got:
        rec.append(aborted)
        got.notify_all()
armed = threading.Event()               # the next submit collects
dropped = threading.Event()
class Ex(cf.ThreadPoolExecutor):
    def submit(self, fn, *args, **kw):
        if armed.is_set():
            armed.clear()
            assert dropped.wait(20)
            dropped.clear()
            gc.collect()                # on the dropped queue's own worker
        return super().submit(fn, *args, **kw)
ex = Ex(2)
for r in range(30):
    # The rounds before are delivered: the next submit is this queue's first
    # call, on its worker, and waits there until the queue is dropped (the
    # timer's 0.01 s once raced the drop: under load the queue of the last
    # round was not collected at all).
    armed.set()
    b = px.TimerQueue(ex)
    b.me = b                            # a cycle: only the collector frees it
    b.add(0.01, call)
    for _ in range(20):
        b.add(60, call)
    del b
    dropped.set()
    with got:
        got.wait_for(lambda: len(rec) >= (r + 1) * 21, 20)
assert len(rec) == 30 * 21 and rec.count(True) >= 30 * 20, (len(rec), rec.count(True))
ex.shutdown()
print("ok")
""")


def test_handler_queue_and_its_timer_queue_collected_together_lose_no_call():
    """A HandlerQueue and a TimerQueue posting into it, dropped together in one
    reference cycle: whichever __del__ the collector runs first, every handler
    is called exactly once, aborted.  The collector clears weak references
    before it runs finalizers, so the HandlerQueue's close() did not see the
    TimerQueue among its users; when it ran first it freed its C queue, and
    the TimerQueue's close() then posted the aborted calls into freed memory:
    all lost (or a crash, or a hang)."""
    run_race("""
import gc, parataxis
calls = []
class Box:
    pass
for i in range(200):
    b = Box()
    b.hq = parataxis.HandlerQueue()
    b.q = parataxis.TimerQueue(executor=b.hq)
    b.q.add(60, lambda aborted, i=i: calls.append((i, aborted)))
    b.self = b                  # a cycle: only the collector frees it
    del b
    gc.collect()
assert sorted(calls) == [(i, True) for i in range(200)], calls[:10]
print("ok")
""")


def test_loop_queue_and_its_handler_queue_collected_together_lose_no_call():
    """The same with an asyncio loop as the executor, once the loop is closed:
    the TimerQueue and its own HandlerQueue (what it posts into) are freed
    together by the collector, the HandlerQueue first, and every handler is
    still called exactly once, aborted."""
    run_race("""
import asyncio, gc, parataxis
calls = []
class Box:
    pass
for i in range(50):
    loop = asyncio.new_event_loop()
    b = Box()
    q = parataxis.TimerQueue(executor=loop)
    q.add(60, lambda aborted, i=i: calls.append((i, aborted)))
    # The queue reachable only through a later object: this collection moves
    # it behind its HandlerQueue in the collector's list, so the next one
    # finalizes the HandlerQueue first.
    hq = q._hq
    box = [q]
    del q
    gc.collect()
    b.q = box.pop()
    b.self = b                  # a cycle: only the collector frees it
    del b, box, hq
    loop.close()                # nothing watches the queue's HandlerQueue now
    gc.collect()
assert sorted(calls) == [(i, True) for i in range(50)], sorted(calls)[:10]
print("ok")
""")


def test_handler_queue_close_racing_its_timer_queues_close_loses_no_call():
    """HandlerQueue.close() racing the close() of a TimerQueue posting into it:
    the TimerQueue's close() in the other thread makes this one's tq.close()
    return at once, so the HandlerQueue used to free its C queue while that
    TimerQueue's worker still posted the aborted calls into it (about one in
    twenty lost).  The C queue now goes with the last of the two."""
    run_race("""
import collections, threading, parataxis
calls = collections.Counter()
ROUNDS = 300
for r in range(ROUNDS):
    hq = parataxis.HandlerQueue()
    q = parataxis.TimerQueue(executor=hq)
    for k in range(20):
        q.add(60, lambda aborted, k=(r, k): calls.update([(k, aborted)]))
    start = threading.Barrier(2)
    def closer():
        start.wait()
        q.close()
    t = threading.Thread(target=closer)
    t.start()
    start.wait()
    hq.close()
    t.join()
assert sorted(calls) == [((r, k), True) for r in range(ROUNDS) for k in range(20)], len(calls)
assert set(calls.values()) == {1}, calls.most_common(3)
print("ok")
""")

def test_cancellation_token_is_alive_for_finalizers_in_its_cycle():
    """A finalizer of an object in the same reference cycle as a
    CancellationToken may still use the token: its C memory is freed when the
    token is deallocated, after every finalizer of the cycle ran.  It was an
    ffi.gc object, whose destructor the collector may run first: cancel() and
    cancelled then read freed memory (here filled with junk: a new token
    looked cancelled and cancel() returned False)."""
    run_race("""
import gc, parataxis as px
seen = []
class Holder:
    def __del__(self):
        seen.append((self.t.cancelled, self.t.cancel(), self.t.cancelled))
for _ in range(20):
    t = px.CancellationToken()      # made before its holder: first in the list
    h = Holder()
    h.t = t
    h.me = h                        # a cycle: only the collector frees it
    del t, h
    gc.collect()
assert seen == [(False, True, True)] * 20, seen
print("ok")
""")


def test_primitive_is_alive_for_finalizers_in_its_cycle():
    """A finalizer of an object in the same reference cycle as a sync object
    may still use it, as it may a CancellationToken: the object's C memory is
    collected when its _host.Prim is deallocated, after every finalizer of the
    cycle ran -- not in the object's own __del__, which the collector may run
    first (then set() and release() wrote into freed memory: a corrupted heap)."""
    run_race("""
import gc, parataxis as px
seen = []
class Holder:
    def __del__(self):
        e, s = self.e, self.s
        e.set(); s.release()
        seen.append((e.is_set(), s.value))
def main():
    for _ in range(200):
        e, s = px.Event(), px.Semaphore(0)  # made before the holder: finalized first
        h = Holder()
        h.e, h.s = e, s
        h.me = h                        # a cycle: only the collector frees it
        del e, s, h
        gc.collect()
px.run(main)
assert seen == [(True, 1)] * 200, seen
print("ok")
""")


# -- item 12: timer handles -------------------------------------------------------

def test_handles_of_another_queue_do_not_cancel_this_queues_timers():
    a_rec, b_rec = Recorder(), Recorder()
    with parataxis.TimerQueue() as a, parataxis.TimerQueue() as b:
        ha = a.add(60, a_rec)
        hb = b.add(60, b_rec)
        assert a.cancel(hb) is False          # b's first timer is not a's
        assert b.cancel(ha) is False
        assert a.pending == 1 and b.pending == 1
        assert a_rec.calls == [] and b_rec.calls == []
        assert b.cancel(hb) is True
        assert b_rec.wait_for(1) == [True]
        assert a.pending == 1 and a_rec.calls == []
    assert a_rec.calls == [True]


def test_timer_handle_cancel_cancelled_when():
    rec = Recorder()
    with parataxis.TimerQueue() as q:
        t0 = parataxis.now()
        h = q.add(30, rec)
        t1 = parataxis.now()
        assert isinstance(h, parataxis.TimerHandle)
        assert t0 + 30 <= h.when() <= t1 + 30
        assert h.cancelled() is False
        assert h.cancel() is True
        assert h.cancelled() is True
        assert h.cancel() is False            # already cancelled
        assert q.cancel(h) is False
        assert rec.wait_for(1) == [True]

        fired = q.add(0, rec)
        rec.wait_for(2)
        assert fired.cancel() is False and fired.cancelled() is False

        p = q.add_periodic(60, 1, rec)
        assert isinstance(p, parataxis.TimerHandle)
        assert q.cancel(p) is True and p.cancelled()
        rec.wait_for(3)

        left = q.add(60, rec)
        with pytest.raises(TypeError):
            q.cancel(1)                       # ids are handles now
    assert rec.calls == [True, False, True, True]
    assert left.cancelled() is False          # close() aborted it; no cancel() did
    with pytest.raises(parataxis.Closed):
        left.cancel()
    with pytest.raises(parataxis.Closed):
        q.cancel(left)


def test_add_and_cancel_take_keywords_and_check_their_arguments():
    rec = Recorder()
    with parataxis.TimerQueue() as q:
        h = q.add(delay=60, fn=rec)
        assert q.cancel(handle=h) is True
        assert rec.wait_for(1) == [True]
        with pytest.raises(TypeError):
            q.add(60)
        with pytest.raises(TypeError):
            q.add(60, rec, 1)
        with pytest.raises(TypeError):
            q.add(True, rec)                  # a bool is no number of seconds
        with pytest.raises(TypeError):
            q.add(60, "not callable")
        with pytest.raises(parataxis.InvalidArgument):
            q.add(-1, rec)
        with pytest.raises(parataxis.InvalidArgument):
            q.add(-10**30, rec)               # no float holds it: still negative
        with pytest.raises(TypeError):
            q.cancel()
        with pytest.raises(TypeError):
            q.cancel(h, h)
        assert q.pending == 0
    assert rec.calls == [True]


def test_a_handle_drops_its_handler_at_the_final_call():
    # A handler that refers to its own handle makes a cycle through an object
    # the garbage collector does not track: it must end at the final call.
    rec = Recorder()
    with parataxis.TimerQueue() as q:
        def fn(aborted, box=[]):
            rec(aborted)
        fn.__defaults__[0].append(q.add(60, fn))
        p = q.add_periodic(60, 1, fn)
        fn.__defaults__[0].append(p)
        gone = weakref.ref(fn)
        del fn
        assert q.cancel(gone().__defaults__[0][0]) is True
        assert p.cancel() is True
        rec.wait_for(2)
    assert gone() is None                     # close() waited for the calls
    assert rec.calls == [True, True]


def test_queues_closed_from_their_own_handlers_are_freed():
    # close() from one of the queue's own handlers on its worker cannot join
    # that worker, which still delivers; what it uses must go once it is done,
    # not only at interpreter exit: a program that does this in a loop must not
    # grow.
    states = []
    for _ in range(50):
        done = threading.Event()
        q = parataxis.TimerQueue()
        q.add(0, lambda aborted, q=q: (q.close(), done.set()))
        states.append(weakref.ref(q._state))
        assert done.wait(TIMEOUT)
        del q

    def freed():
        gc.collect()
        parataxis.TimerQueue().close()
        return sum(s() is not None for s in states) <= 1
    assert wait_until(freed)


# -- item 13: the asyncio loop closed under its queue --------------------------------

def test_add_after_the_loop_closed_raises_closed():
    loop = asyncio.new_event_loop()
    rec, late = Recorder(), Recorder()
    q = parataxis.TimerQueue(executor=loop)
    q.add(0, rec)                             # expires, but no loop will run it
    q.add(60, rec)
    t = parataxis.Timer(q)
    loop.close()
    with pytest.raises(parataxis.Closed):
        q.add(0, late)
    with pytest.raises(parataxis.Closed):
        q.add_periodic(0, 1, late)
    with pytest.raises(parataxis.Closed):
        t.async_wait(late)
    assert q.closed
    # the owed calls came when the queue closed itself, not lost
    assert rec.calls == [True, True]
    assert late.calls == []
    q.close()
