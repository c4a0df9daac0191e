"""The rules every primitive of the sync family keeps (tests/c/sync/family.c),
once over a table of them (test_stray_wake.py runs stray_wake.c's over it too).

A row says how to make the primitive, how to make its wait park (arm, on the
main fiber), the wait itself, what a waiter does once its wait returned
(leave), how to let one waiter through (release, on the main fiber), how many
wait (where the API tells) and the wait's reason in a deadlock report.
"""
import contextlib
import threading

import pytest

import parataxis as px
from sync_kit import TIMEOUT, cancel_from_thread, run, settle, until


class Kind:
    name = ""
    group = ""              # the C group it counts for (tests/behaviours.txt): rwlock, chan...
    reason = ""
    queues = True           # several waiters queue (a barrier of 2 holds one)
    wakes_all = False       # one release lets every waiter through
    has_holder = False      # the report names the fiber that holds it
    wait_of = None          # the wait's method, unbound: wait_of(obj) waits on obj
    chains = False          # a waiter's leave passes it on: the main fiber releases once

    def make(self):
        raise NotImplementedError

    def arm(self, h):
        pass

    def block(self, h):
        raise NotImplementedError

    def leave(self, h, got):
        pass

    def release(self, h):
        raise NotImplementedError

    def queued(self, h):
        return None         # the API has no count of waiters

    def holder_id(self, h):
        return None         # the API names no fiber that holds it

    def hosted_check(self, h):
        """After a waiter's hosted wait was let through and it left."""

    def off_fiber(self, h):
        """The calls that need a fiber."""
        return [lambda: self.block(h)]

    def foreign(self, h):
        """While a fiber of another run waits on h (armed, one waiter): the
        calls that would wait or hand over, WrongSchedulerError in this run."""
        return [lambda: self.block(h)]

    def foreign_off(self, h):
        """Those of them that need no fiber, off-fiber on a third thread."""
        return []

    def __init__(self):
        self.group = self.group or self.name

    def __repr__(self):
        return self.name


class ExclusiveKind(Kind):
    """A lock one fiber holds at a time: the main fiber holds it (arm), each
    waiter takes it in turn and gives it on (leave). A row names its type, its
    lock and unlock calls (take, give) and the field that tells who holds it."""
    has_holder, chains = True, True
    lock_type, take, give, holder = None, "", "", ""

    def make(self):
        return self.lock_type()

    def arm(self, h):
        getattr(h, self.take)()

    def block(self, h):
        getattr(h, self.take)()
        return getattr(h, self.holder)

    def leave(self, h, got):
        assert got == px.current_id()
        getattr(h, self.give)()

    def release(self, h):
        getattr(h, self.give)()

    def queued(self, h):
        return h.waiters

    def holder_id(self, h):
        return getattr(h, self.holder)


class MutexKind(ExclusiveKind):
    name, reason = "mutex", "Mutex lock"
    lock_type, take, give, holder = px.Mutex, "lock", "unlock", "owner"
    wait_of = staticmethod(px.Mutex.lock)

    def off_fiber(self, m):
        return [m.lock, m.try_lock, m.unlock, m.__enter__]

    def foreign(self, m):
        return [m.lock, m.__enter__]


class RwWriteKind(ExclusiveKind):
    name, group, reason = "rwlock_write", "rwlock", "RwLock write lock"
    lock_type, take, give, holder = px.RwLock, "wrlock", "wrunlock", "writer"
    wait_of = staticmethod(px.RwLock.wrlock)

    def off_fiber(self, lk):
        return [lk.rdlock, lk.wrlock, lk.try_rdlock, lk.try_wrlock, lk.rdunlock,
                lk.wrunlock, lk.read().__enter__, lk.write().__enter__]

    def foreign(self, lk):
        return [lk.rdlock, lk.wrlock, lk.read().__enter__, lk.write().__enter__]


class RwReadKind(RwWriteKind):
    name, group, reason = "rwlock_read", "rwlock", "RwLock read lock"
    wait_of = staticmethod(px.RwLock.rdlock)

    def block(self, lk):
        lk.rdlock()
        return lk.readers

    def leave(self, lk, got):
        assert got >= 1
        lk.rdunlock()

    def holder_id(self, lk):
        return None         # readers are not named


class WaitGroupKind(Kind):
    name, reason, wakes_all = "waitgroup", "WaitGroup wait", True
    wait_of = staticmethod(px.WaitGroup.wait)

    def make(self):
        return px.WaitGroup()

    def arm(self, wg):
        wg.add(1)

    def block(self, wg):
        wg.wait()
        return wg.count

    def release(self, wg):
        wg.done()

    def foreign(self, wg):
        return [wg.wait, wg.done]

    def foreign_off(self, wg):
        return [wg.done]


class BarrierKind(Kind):
    """Two parties: the waiter, and the main fiber that releases it by arriving."""
    name, reason, queues, wakes_all = "barrier", "Barrier arrive", False, True
    wait_of = staticmethod(px.Barrier.arrive_and_wait)

    def make(self):
        return px.Barrier(2)

    def block(self, b):
        return b.arrive_and_wait()

    def leave(self, b, got):
        assert got is False

    def release(self, b):
        assert b.arrive_and_wait() is True

    def hosted_check(self, b):
        assert b.phase == 1             # the re-call did not arrive again

    def queued(self, b):
        return b.waiting


class OnceKind(Kind):
    """A runner fiber is inside the action until release lets it end."""
    name, reason, wakes_all = "once", "Once init", True
    wait_of = staticmethod(lambda o: px.Once.do(o, pytest.fail))

    def make(self):
        return px.Once(), px.Semaphore(0)

    def arm(self, h):
        once, gate = h
        def run_it():
            try:
                once.do(gate.acquire)
            except px.Cancelled:        # a deadlock test's run ends by cancelling it
                pass
        runner = px.spawn(run_it)
        until(lambda: gate.waiters == 1, "the runner is in the action")
        assert not runner.done

    def block(self, h):
        return h[0].do(pytest.fail, "a waiter ran the action")

    def leave(self, h, got):
        assert got is None and h[0].done

    def release(self, h):
        h[1].release()

    def off_fiber(self, h):
        return [lambda: h[0].do(pytest.fail)]

    def foreign(self, h):
        return [lambda: h[0].do(pytest.fail)]


class SemKind(Kind):
    name, reason = "sem", "Semaphore acquire"
    wait_of = staticmethod(px.Semaphore.acquire)

    def make(self):
        return px.Semaphore(0)

    def block(self, s):
        s.acquire()
        return s.value

    def leave(self, s, got):
        assert got == 0                 # handed over: the count never rose

    def release(self, s):
        s.release()

    def queued(self, s):
        return s.waiters

    def hosted_check(self, s):
        assert s.value == 0             # one unit, taken once

    def off_fiber(self, s):
        return [s.acquire, s.try_acquire, s.release, s.__enter__]

    def foreign(self, s):
        return [s.acquire, s.release, s.__enter__]


class EventKind(Kind):
    name, reason, wakes_all = "event", "Event wait", True
    wait_of = staticmethod(px.Event.wait)

    def make(self):
        return px.Event()

    def block(self, e):
        e.wait()
        return e.is_set()

    def release(self, e):
        e.set()

    def off_fiber(self, e):
        return [e.wait, e.set, e.clear]

    def foreign(self, e):
        return [e.wait, e.set]


class RecvKind(Kind):
    """Each release hands a fresh object to a receiver."""
    name, group, reason = "chan_recv", "chan", "Channel recv"
    wait_of = staticmethod(px.Channel.recv)

    def make(self):
        return px.Channel()

    def block(self, ch):
        return ch.recv()

    def leave(self, ch, got):
        assert isinstance(got, Token)

    def release(self, ch):
        assert ch.try_send(Token())

    def hosted_check(self, ch):
        assert len(ch) == 0 and ch.try_send(Token()) is False   # nothing more taken

    def off_fiber(self, ch):
        return [ch.recv, lambda: ch.send(1), lambda: ch.try_send(1), ch.try_recv, ch.close]

    def foreign(self, ch):
        return [ch.recv, lambda: ch.send(1), lambda: ch.try_send(1), ch.close]


class SendKind(Kind):
    """Each waiter sends its own fiber id; release receives one."""
    name, group, reason = "chan_send", "chan", "Channel send"
    wait_of = staticmethod(lambda ch: px.Channel.send(ch, 1))

    def make(self):
        return px.Channel()

    def block(self, ch):
        ch.send(px.current_id())
        return px.current_id()

    def release(self, ch):
        ok, v = ch.try_recv()
        assert ok
        released.append(v)

    def hosted_check(self, ch):
        assert ch.try_recv() == (False, None)   # the re-call did not send again

    def off_fiber(self, ch):
        return [ch.recv, lambda: ch.send(1)]

    def foreign(self, ch):
        return [ch.recv, lambda: ch.send(1), ch.try_recv, ch.close]


released = []


class Token:
    pass


KINDS = [MutexKind(), RwWriteKind(), RwReadKind(), WaitGroupKind(), BarrierKind(),
         OnceKind(), SemKind(), EventKind(), RecvKind(), SendKind()]
QUEUEING = [k for k in KINDS if k.queues and not k.wakes_all]
params = pytest.mark.parametrize("k", KINDS, ids=repr)


def waiter(k, h, log=None, tag=None):
    """A fiber's body: the wait, then what a waiter does after it."""
    def body():
        got = k.block(h)
        if log is not None:
            log.append(tag)
        k.leave(h, got)
        return tag
    return body


def spawn_waiting(k, h, body):
    """Spawns body and yields until it waits (its wait is queued)."""
    before = k.queued(h)
    f = px.spawn(body)
    if before is not None:
        until(lambda: k.queued(h) == before + 1, f"{k.name}: the waiter queued")
    else:
        settle()
    assert not f.done
    return f


def interrupted(k, h, scope):
    """A waiter whose wait is inside `scope`; it returns what the wait raised."""
    def body():
        try:
            with scope:
                k.block(h)
        except (px.Timeout, px.Cancelled) as e:
            return type(e)
        return "not interrupted"
    return body


# -- off-fiber calls -----------------------------------------------------------------

@params
def test_off_fiber_calls_are_enofiber_and_null_is_einval(k):
    """C's PX_EINVAL for NULL has no Python counterpart (there is no NULL to
    pass); its other half, the wait's method given an object of another kind
    in place of its own, is refused (on a fiber: off-fiber the NoFiberError
    comes first) and changes nothing: TypeError from the C side's check of the
    object's kind, AttributeError where the method reaches Python state of its
    own kind first (Channel.send)."""
    h = k.make()
    for call in k.off_fiber(h):
        with pytest.raises(px.NoFiberError):
            call()

    def body():
        other = px.Mutex() if k.name != "mutex" else px.Event()
        state = repr(other)
        with pytest.raises((TypeError, AttributeError)):
            k.wait_of(other)
        assert repr(other) == state
    run(body)


# -- interrupted waits -----------------------------------------------------------------

def _interrupt_then_release(k, make_scope, interrupt):
    """Arms k, queues an interrupted waiter A then a live one B; interrupts A,
    checks it left nothing queued and that the release reaches B."""
    def body():
        h = k.make()
        k.arm(h)
        scope, tok = make_scope()
        a = spawn_waiting(k, h, interrupted(k, h, scope))
        b = spawn_waiting(k, h, waiter(k, h, tag="b")) if k.queues else None
        interrupt(tok)
        assert a.join() is (px.Timeout if tok is None else px.Cancelled)
        if k.queued(h) is not None:
            assert k.queued(h) == (1 if b else 0)
        if b is None:
            b = spawn_waiting(k, h, waiter(k, h, tag="b"))
        k.release(h)
        assert b.join() == "b"
        if k.queued(h) is not None:
            assert k.queued(h) == 0
    run(body)


def _timeout_scope():
    return px.timeout(0.05), None


def _token_scope():
    tok = px.CancellationToken()
    return px.cancel_scope(tok), tok


@params
def test_timed_out_or_cancelled_wait_leaves_nothing_queued(k):
    _interrupt_then_release(k, _timeout_scope, lambda tok: None)
    _interrupt_then_release(k, _token_scope, lambda tok: tok.cancel())


@params
def test_wait_cancelled_by_another_thread_leaves_nothing_queued(k):
    _interrupt_then_release(k, _token_scope, cancel_from_thread)


@pytest.mark.parametrize("k", [k for k in KINDS if k.queues], ids=repr)
def test_release_right_after_an_interrupt_goes_past_it_to_the_next_waiter(k):
    """Not for the barrier: a barrier of two holds one waiter."""
    def body():
        h = k.make()
        k.arm(h)
        tok = px.CancellationToken()
        a = spawn_waiting(k, h, interrupted(k, h, px.cancel_scope(tok)))
        b = spawn_waiting(k, h, waiter(k, h, tag="b"))
        tok.cancel()
        k.release(h)                    # before A ran again: it is leaving
        assert a.join() is px.Cancelled
        assert b.join() == "b"
        if k.queued(h) is not None:
            assert k.queued(h) == 0
    run(body)


def _fired_scope(k):
    """A wait in a scope that fired before it fails at once, queueing nothing
    (a barrier: its arrival not counted); a fresh waiter gets the release."""
    def body():
        h = k.make()
        k.arm(h)
        tok = px.CancellationToken()
        tok.cancel()

        def fired():                    # not the arming fiber: a lock's holder would relock
            with pytest.raises(px.Cancelled):
                with px.cancel_scope(tok):
                    k.block(h)
            with pytest.raises(px.Timeout):
                with px.timeout(0):
                    k.block(h)
        px.spawn(fired).join()
        if k.queued(h) is not None:
            assert k.queued(h) == 0
        b = spawn_waiting(k, h, waiter(k, h, tag="b"))
        k.release(h)
        assert b.join() == "b"
    run(body)


@pytest.mark.parametrize("k", [k for k in KINDS if k.name not in ("mutex", "barrier")],
                         ids=repr)
def test_wait_in_a_fired_scope_fails_at_once_without_queueing(k):
    _fired_scope(k)


@pytest.mark.group("mutex")
def test_lock_in_a_fired_scope_fails_at_once_without_queueing():
    """As C's: a held mutex fails at once, queueing nothing; a free one is
    still taken in a fired scope (no wait was needed)."""
    _fired_scope(MutexKind())

    def body():
        m = px.Mutex()
        tok = px.CancellationToken()
        tok.cancel()
        with px.cancel_scope(tok):
            m.lock()
            assert m.owner == px.current_id()
        m.unlock()
    run(body)


@pytest.mark.group("barrier")
def test_arrival_in_a_fired_scope_fails_at_once_without_counting():
    _fired_scope(BarrierKind())


# -- hosted fibers ---------------------------------------------------------------------

@params
def test_hosted_fiber_waits_through_eyield_and_a_recall(k):
    """Every Python fiber is hosted, as a Lua fiber: its wait parks through
    PX_EYIELD and the binding calls it again once woken.  The release lets the
    waiter through (and, where the primitive names a holder, makes the waiter
    the holder before it runs); the re-call takes what was handed over, once."""
    def body():
        h = k.make()
        k.arm(h)
        named = k.has_holder and not isinstance(k, RwReadKind)
        w = spawn_waiting(k, h, waiter(k, h, tag="through"))
        k.release(h)
        if named:
            assert k.holder_id(h) == w.id       # owner before it runs
        assert w.join() == "through"
        if named:
            assert k.holder_id(h) is None
        k.hosted_check(h)
    run(body)


@pytest.mark.group("mutex")
def test_hosted_fiber_timed_out_lock_leaves_no_waiter():
    def body():
        m = px.Mutex()
        m.lock()

        def gives_up():                 # while main holds it
            with pytest.raises(px.Timeout):
                with px.timeout(0.01):
                    m.lock()
            return m.waiters, m.owner != px.current_id()
        assert px.spawn(gives_up).join() == (0, True)
        assert m.owner == px.current_id()
        m.unlock()
    run(body)


# -- hand-off -------------------------------------------------------------------------

def _hands_off(k):
    """Five waiters queue; each release (or the one before them, where a
    waiter's leave passes it on) goes to them in the order they came."""
    def body():
        del released[:]
        h = k.make()
        k.arm(h)
        log = []
        fibers = [spawn_waiting(k, h, waiter(k, h, log, i)) for i in range(5)]
        for i in range(5):
            if i == 0 or not k.chains:
                k.release(h)
            until(lambda: len(log) > i or fibers[i].done, "the next waiter ran")
        assert [f.join() for f in fibers] == list(range(5))
        assert log == list(range(5))
        if k.name == "chan_send":
            assert released == [f.id for f in fibers]
    run(body)


@pytest.mark.parametrize("k", [k for k in QUEUEING if k.name != "sem"], ids=repr)
def test_hands_off_in_fifo_order(k):
    _hands_off(k)


@pytest.mark.group("sem")
def test_hands_units_off_in_fifo_order():
    _hands_off(SemKind())


@pytest.mark.parametrize("k", [k for k in KINDS if k.wakes_all], ids=repr)
def test_one_call_wakes_every_waiter(k):
    """As C's: four waiters park, and one release lets them all through (a
    barrier: of five parties, the fifth arrival leads), and says so (an
    event's set returns how many it woke)."""
    def body():
        n = 4
        h = px.Barrier(n + 1) if isinstance(k, BarrierKind) else k.make()
        k.arm(h)
        fibers = [spawn_waiting(k, h, waiter(k, h, tag=i)) for i in range(n)]
        if isinstance(k, EventKind):
            assert h.set() == n
        else:
            k.release(h)
        assert [f.join() for f in fibers] == list(range(n))
        if isinstance(k, EventKind):
            assert h.set() == 0         # nobody waits any more
    run(body)


# -- deadlock reports ---------------------------------------------------------------------

@params
def test_deadlock_report_names_the_wait_and_the_primitive(k):
    ids = {}

    def main():
        h = k.make()
        k.arm(h)
        ids["main"] = px.current_fiber().number
        ids["waiter"] = spawn_waiting(k, h, interrupted(k, h, contextlib.nullcontext())).number
        px.Event().wait()               # nothing will ever set it
    with pytest.raises(px.DeadlockError) as e:
        px.run(main)
    report = str(e.value)
    assert f'"{k.reason}"' in report, report
    assert f"fiber {ids['waiter']} " in report, report
    if k.has_holder:
        assert f"held by fiber {ids['main']} " in report, report


# -- another run's object -----------------------------------------------------------------

def in_a_run_on_another_thread(before, after):
    """Runs before() in px.run on a thread of its own, whose run then stays
    alive (its thread blocked in its main fiber) until the returned stop()
    is called; then after() runs in it, and stop() returns once the run
    ended.  An error on that thread fails the test."""
    ready, go, errors = threading.Event(), threading.Event(), []

    def main():
        try:
            before()
        except BaseException as e:
            errors.append(e)
        ready.set()
        assert go.wait(TIMEOUT)         # blocks this run's thread: it stays alive
        after()
    def thread():
        try:
            run(main)
        except BaseException as e:
            errors.append(e)
    t = threading.Thread(target=thread)
    t.start()
    assert ready.wait(TIMEOUT)
    assert not errors, errors

    def stop():
        go.set()
        t.join(TIMEOUT)
        assert not t.is_alive()
        assert not errors, errors
    return stop


@params
def test_two_schedulers_at_once_is_ethread_and_changes_nothing(k):
    """C's rule: while a fiber of one run waits on it (or holds it), a call
    from another run that would wait or hand over is WrongSchedulerError
    (PX_ETHREAD), and leaves it as it was; then the home run goes on."""
    h = k.make()
    home = {}

    def arm_and_park():
        k.arm(h)
        home["w"] = spawn_waiting(k, h, waiter(k, h))

    def let_through():
        k.release(h)
        home["w"].join()
    stop = in_a_run_on_another_thread(arm_and_park, let_through)
    try:
        state = repr(h)
        for call in k.foreign_off(h):   # this thread runs no scheduler
            with pytest.raises(px.WrongSchedulerError):
                call()
            assert repr(h) == state

        def body():
            for call in k.foreign(h):
                with pytest.raises(px.WrongSchedulerError):
                    call()
                assert repr(h) == state
        run(body)
    finally:
        stop()


@params
def test_an_object_no_fiber_waits_on_or_holds_works_in_any_run(k):
    """The same rule seen from the other side: another run on another
    thread that used the object and is still alive, but has no fiber waiting
    on it or holding it, does not keep this run from using it."""
    h = k.make()

    def cycle():
        if isinstance(k, OnceKind):
            assert h[0].do(int) is None or h[0].done
            return
        if isinstance(k, EventKind):
            h.clear()                   # the other run's set left it set
        k.arm(h)
        w = spawn_waiting(k, h, waiter(k, h))
        k.release(h)
        w.join()
    stop = in_a_run_on_another_thread(cycle, lambda: None)
    try:
        run(cycle)
    finally:
        stop()


# -- repr ----------------------------------------------------------------------------------

def test_repr_of_every_primitive_says_its_state():
    def body():
        m = px.Mutex()
        assert repr(m) == "<parataxis.Mutex free, 0 waiting>"
        m.lock()
        spawn_waiting(MutexKind(), m, lambda: (m.lock(), m.unlock()))
        assert repr(m) == f"<parataxis.Mutex owned by {px.current_id()}, 1 waiting>"
        m.unlock()
        lk = px.RwLock()
        lk.rdlock()
        assert repr(lk) == "<parataxis.RwLock 1 readers, 0 waiting>"
        lk.rdunlock()
        lk.wrlock()
        assert repr(lk) == f"<parataxis.RwLock written by {px.current_id()}, 0 waiting>"
        lk.wrunlock()
        wg = px.WaitGroup()
        wg.add(3)
        assert repr(wg) == "<parataxis.WaitGroup count=3>"
        b = px.Barrier(2)
        assert repr(b) == "<parataxis.Barrier phase=0, 0 waiting>"
        o = px.Once()
        assert repr(o) == "<parataxis.Once not done>"
        o.do(int)
        assert repr(o) == "<parataxis.Once done>"
        s = px.Semaphore(2)
        assert repr(s) == "<parataxis.Semaphore value=2, 0 waiting>"
        e = px.Event()
        assert repr(e) == "<parataxis.Event clear>"
        e.set()
        assert repr(e) == "<parataxis.Event set>"
        ch = px.Channel(4)
        ch.send(1)
        assert repr(ch) == "<parataxis.Channel open, 1/4>"
        ch.close()
        assert repr(ch) == "<parataxis.Channel closed, 1/4>"
    run(body)


# A busy object reached by the collector is kept and freed when the run ends
# (bindings/host/graves.c): counted in C's heap (glibc's mallinfo2), in a child
# so that nothing else of the session allocates.  Held, as Python can reach it:
# an object waited on is still referred to by its waiter's frame.
_GRAVES = r'''
import ctypes, gc, sys
import parataxis as px

class _MI(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = _MI
N = 4000

def heap():
    gc.collect()
    return libc.mallinfo2().uordblks

def main():
    held = [px.Mutex() for _ in range(N)] + [px.RwLock() for _ in range(N)]
    def holder():
        for i in range(len(held)):
            held[i].lock() if i < N else held[i].wrlock()
        px.sleep(0.01)                  # ends holding them: released as it ends
    f = px.spawn(holder)
    px.yield_()                         # it holds every one now
    held.clear()
    gc.collect()                        # collected while held
    f.join()
    raise KeyError("stop")

def once():
    try:
        px.run(main)
    except KeyError:
        pass

once()
before = heap()
for _ in range(3):
    once()
print((heap() - before) // (3 * 2 * N))
'''


@pytest.mark.group("family")
def test_objects_collected_while_held_are_freed_at_the_end_of_the_run():
    import ctypes
    import subprocess
    import sys
    if not hasattr(ctypes.CDLL(None), "mallinfo2"):
        pytest.skip("needs glibc's mallinfo2")
    out = subprocess.run([sys.executable, "-c", _GRAVES], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    per_object = int(out.stdout)
    assert per_object < 8, f"{per_object} bytes of C heap left per collected busy object"


@pytest.mark.group("family")
def test_objects_collected_while_held_or_waited_on_are_freed_safely():
    """As the Lua suite's: a mutex collected while its fiber holds it, a
    semaphore whose only reference is its waiter's (the frame of the wait),
    the collector run while they are busy; the holder ends, the run ends by
    an exception that cancels the parked acquire, and nothing breaks."""
    import gc

    def holder():
        m = px.Mutex()
        m.lock()
        del m
        gc.collect()                    # collected while held
        px.sleep(0.005)

    def main():
        f = px.spawn(holder)
        px.spawn(lambda: px.Semaphore(0).acquire())
        for _ in range(3):
            gc.collect()
            px.yield_()
        f.join()
        raise KeyError("stop")          # cancels the parked acquire
    with pytest.raises(KeyError, match="stop"):
        px.run(main)
    gc.collect()
