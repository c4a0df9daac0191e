"""Each primitive's own behaviour, mirroring tests/c/sync/<primitive>.c (the
rules common to the family are in test_sync_family.py)."""
import random

import pytest

import parataxis as px
from sync_kit import cancel_from_thread, outcome, run, settle, until
from test_sync_family import in_a_run_on_another_thread

# Each test's group in tests/behaviours.txt: the primitive of its section.
mutex, mutex_holds, rwlock, waitgroup, barrier, once, sem, event, chan = (
    pytest.mark.group(g) for g in ("mutex", "mutex_holds", "rwlock", "waitgroup", "barrier",
                                   "once", "sem", "event", "chan"))


def parked(f, queued=None):
    """Yields until fiber f waits (queued() rose, when given)."""
    settle()
    if queued is not None:
        until(queued, "the fiber queued")
    assert not f.done


def parked_in_scope(tok, wait, *args, queued=None):
    """Spawns a fiber that calls wait(*args) in a cancel scope of tok; returns
    it once it waits (as parked)."""
    def leaving():
        with px.cancel_scope(tok):
            return wait(*args)
    f = px.spawn(leaving)
    parked(f, queued)
    return f


def holding(m, gate):
    """Spawns a fiber that locks m and ends holding it once gate is set;
    returns it once it holds m."""
    def holder():
        m.lock()
        gate.wait()
    h = px.spawn(holder)
    until(lambda: m.owner == h.id, "the holder holds")
    return h


# -- Mutex -----------------------------------------------------------------------------

@mutex
def test_no_lost_updates_with_10_fibers():
    def body():
        m, box = px.Mutex(), [0]

        def add():
            for _ in range(100):
                with m:
                    v = box[0]
                    px.yield_()         # every other fiber runs here: none gets in
                    box[0] = v + 1
        fs = [px.spawn(add) for _ in range(10)]
        for f in fs:
            f.join()
        assert box[0] == 1000
    run(body)


@mutex
def test_unlock_makes_the_first_waiter_owner_before_it_wakes():
    def body():
        m = px.Mutex()
        m.lock()
        f = px.spawn(lambda: (m.lock(), m.unlock()))
        parked(f, lambda: m.waiters == 1)
        m.unlock()
        assert m.owner == f.id and m.waiters == 0
        assert m.try_lock() is False    # handed over: nobody barges in
        f.join()
        assert m.owner is None
    run(body)


@mutex
def test_trylock_never_steals_from_a_queued_waiter():
    def body():
        m = px.Mutex()
        m.lock()
        f = px.spawn(lambda: (m.lock(), m.unlock()))
        parked(f, lambda: m.waiters == 1)
        assert px.spawn(m.try_lock).join() is False
        m.unlock()
        f.join()
    run(body)


@mutex
def test_unlock_by_a_non_owner_or_of_a_free_mutex_is_eperm():
    def body():
        m = px.Mutex()
        with pytest.raises(px.NotOwnerError):
            m.unlock()
        m.lock()
        assert outcome(px.spawn(m.unlock)) is px.NotOwnerError
        assert m.owner == px.current_id()
        m.unlock()
    run(body)


@mutex
def test_relock_and_trylock_by_the_owner_are_edeadlk():
    def body():
        m = px.Mutex()
        m.lock()
        with pytest.raises(px.DeadlockError):
            m.lock()
        with pytest.raises(px.DeadlockError):
            m.try_lock()
        assert m.owner == px.current_id() and m.waiters == 0
        m.unlock()
    run(body)


@mutex_holds
def test_a_fiber_ending_with_several_mutexes_releases_each_with_eownerdead():
    def body():
        ms = [px.Mutex() for _ in range(3)]
        px.spawn(lambda: [m.lock() for m in ms]).join()
        for m in ms:
            assert m.owner is None
            with pytest.raises(px.OwnerDiedError):
                m.lock()
            assert m.owner == px.current_id()     # held by the one told
            m.unlock()
            m.lock()                               # told once only
            m.unlock()
    run(body)


@mutex_holds
def test_a_mutex_left_free_by_a_death_has_no_owner_refuses_unlock_and_frees():
    def body():
        m = px.Mutex()
        px.spawn(m.lock).join()
        assert m.owner is None and m.waiters == 0
        with pytest.raises(px.NotOwnerError):
            m.unlock()
    run(body)


def _none_owned(*ms):
    for m in ms:
        assert m.owner is None and m.waiters == 0


def _unheld(lk):
    assert lk.readers == 0 and lk.writer is None


@mutex_holds
def test_unlocks_in_any_order_release_each_mutex_and_keep_the_others():
    def body():
        a, b, c = px.Mutex(), px.Mutex(), px.Mutex()
        a.lock()
        b.lock()
        c.lock()
        a.unlock()                          # the oldest first
        assert a.owner is None
        assert b.owner == px.current_id()
        with pytest.raises(px.NotOwnerError):
            a.unlock()
        a.lock()                            # now the newest
        b.unlock()
        c.unlock()
        c.lock()
        with pytest.raises(px.DeadlockError):
            c.lock()
        a.unlock()
        c.unlock()
        _none_owned(a, b, c)
        for _ in range(3):                  # each is free to take and let go again
            a.lock()
            b.lock()
            c.lock()
            c.unlock()
            b.unlock()
            a.unlock()
        assert b.try_lock() is True
        b.unlock()
        _none_owned(a, b, c)
    run(body)


@mutex_holds
def test_mutex_holds_mix_with_rwlock_holds_in_any_order_and_in_death():
    def body():
        a, b, r = px.Mutex(), px.Mutex(), px.RwLock()
        a.lock()                            # the mutex under a write lock,
        r.wrlock()                          # let go first
        a.unlock()
        r.wrunlock()
        a.lock()                            # a read hold between two mutexes,
        r.rdlock()
        b.lock()
        r.rdunlock()                        # let go in the middle
        a.unlock()
        b.unlock()
        with pytest.raises(px.NotOwnerError):
            r.rdunlock()
        _none_owned(a, b)
        _unheld(r)

        def dies_holding_three():
            r.wrlock()
            a.lock()
            r.rdlock()
        px.spawn(dies_holding_three).join()    # a death with all three kinds
        _none_owned(a)
        _unheld(r)
        with pytest.raises(px.OwnerDiedError):
            a.lock()
        assert a.owner == px.current_id()   # held by the one told
        with pytest.raises(px.OwnerDiedError):
            r.wrlock()
        assert r.writer == px.current_id()
        a.unlock()
        r.wrunlock()
        _none_owned(a)
        _unheld(r)
    run(body)


@mutex
def test_eownerdead_goes_past_an_interrupted_waiter_to_the_next():
    def body():
        m, tok, gate = px.Mutex(), px.CancellationToken(), px.Event()
        holding(m, gate)
        a = parked_in_scope(tok, m.lock, queued=lambda: m.waiters == 1)
        b = px.spawn(_told, m)
        parked(b, lambda: m.waiters == 2)
        tok.cancel()
        gate.set()                      # the holder ends: the death goes past A to B
        assert outcome(a) is px.Cancelled
        assert b.join() == "told"
        assert m.owner is None and m.waiters == 0
    run(body)


def _told(m):
    try:
        m.lock()
    except px.OwnerDiedError:
        assert m.owner == px.current_id()
        m.unlock()
        return "told"
    m.unlock()
    return "not told"


@mutex
def test_with_on_owner_death_unlocks_and_raises_and_strands_no_lock():
    def body():
        m, gate, ran = px.Mutex(), px.Event(), []
        holding(m, gate)

        def with_block():
            try:
                with m:
                    ran.append("block")     # never: the with unlocked it again and raised
            except px.OwnerDiedError:
                return m.owner
        x = px.spawn(with_block)
        parked(x, lambda: m.waiters == 1)
        w = px.spawn(lambda: (m.lock(), ran.append("waiter"), m.unlock()))
        parked(w, lambda: m.waiters == 2)
        gate.set()
        assert x.join() == w.id         # its unlock handed it on to the next waiter
        w.join()
        assert ran == ["waiter"] and m.owner is None and m.waiters == 0
        with m:                         # told once only
            assert m.owner == px.current_id()
        assert m.owner is None
        px.spawn(m.lock).join()         # a death with nobody waiting
        with pytest.raises(px.OwnerDiedError):
            with m:
                ran.append("block")
        assert ran == ["waiter"] and m.owner is None
    run(body)


@mutex
def test_a_guard_unlocks_when_an_error_unwinds_its_fiber():
    """A with-block is Python's guard: an exception that ends its fiber
    unlocks on the way out, so the next locker is told of no owner death."""
    def body():
        m = px.Mutex()

        def dies():
            with m:
                raise KeyError("boom")
        with pytest.raises(KeyError):
            px.spawn(dies).join()
        m.lock()                        # no OwnerDiedError: the with released it
        m.unlock()
    run(body)


@mutex
def test_with_unlocks_when_the_block_raises():
    def body():
        m = px.Mutex()
        with pytest.raises(KeyError):
            with m:
                raise KeyError
        assert m.owner is None
        with pytest.raises(px.Timeout):
            with m:
                with px.timeout(0.01):
                    px.Event().wait()
        assert m.owner is None and m.waiters == 0
    run(body)


@mutex
def test_lock_held_by_a_fiber_of_another_scheduler_is_ethread():
    """Another run's main fiber holds it, nobody waits: a lock here would park
    on a foreign holder (WrongSchedulerError), try_lock is refused, unlock is
    not ours."""
    m = px.Mutex()
    stop = in_a_run_on_another_thread(m.lock, m.unlock)
    try:
        def body():
            with pytest.raises(px.WrongSchedulerError):
                m.lock()
            assert m.try_lock() is False
            with pytest.raises(px.NotOwnerError):
                m.unlock()
            assert m.waiters == 0
        run(body)
    finally:
        stop()
    assert m.owner is None


@mutex
def test_a_fiber_id_that_held_the_lock_is_never_mistaken_for_a_new_fiber():
    def body():
        m, ids = px.Mutex(), []
        first = px.spawn(lambda: (m.lock(), m.unlock(), px.current_id())).join()[2]
        px.spawn(m.lock).join()         # and one that died holding it

        def later():                    # fiber records are recycled; ids are not
            me = px.current_id()
            assert me != first and m.owner != me
            try:
                assert m.try_lock()     # never DeadlockError: not the owner
            except px.OwnerDiedError:
                pass
            m.unlock()
            return me
        for _ in range(64):
            ids.append(px.spawn(later).join())
        assert len(set(ids)) == 64
    run(body)


@mutex
def test_deadlock_report_names_the_holders_and_prints_the_cycle():
    ids = {}

    def main():
        a, b = px.Mutex(), px.Mutex()

        def one(first, second):
            try:
                with first:
                    px.yield_()
                    with second:
                        pass
            except px.Cancelled:
                pass
        f = px.spawn(one, a, b)
        g = px.spawn(one, b, a)
        ids["f"], ids["g"] = f.number, g.number
        f.join()
        g.join()
    with pytest.raises(px.DeadlockError) as e:
        px.run(main)
    report = str(e.value)
    assert '"Mutex lock"' in report and "wait-for cycle" in report, report
    assert f"held by fiber {ids['f']} " in report and f"held by fiber {ids['g']} " in report


# -- Mutex and RwLock: the rules of tests/c/sync/family.c over their lock rows -----------

class LockRow:
    """A lock of the family as C's rows see it: arm takes it (a mutex's lock,
    the rwlock's write lock), wait is the waiters' wait (lock, rdlock), leave
    what a waiter does with it, holder the fiber arm made the holder; tries and
    untries its try forms and what undoes each.  At an owner death `waiters`
    wait, the first is told (OwnerDiedError, holding it) and later waits are
    told when `told_later`."""

    def __init__(self, group, make, arm, wait, try_wait, leave, holder, tries, untries,
                 waiters, told_later):
        self.group, self.make, self.arm, self.wait = group, make, arm, wait
        self.try_wait, self.leave, self.holder = try_wait, leave, holder
        self.tries, self.untries = tries, untries
        self.waiters, self.told_later = waiters, told_later

    def __repr__(self):
        return self.group


def _leave_mutex(m):
    assert m.owner == px.current_id()
    m.unlock()


def _leave_read(lk):
    assert lk.readers == 1
    lk.rdunlock()


LOCKS = [
    LockRow("mutex", px.Mutex, px.Mutex.lock, px.Mutex.lock, px.Mutex.try_lock, _leave_mutex,
            lambda m: m.owner, lambda m: [m.try_lock], lambda m: [m.unlock], 2, False),
    LockRow("rwlock", px.RwLock, px.RwLock.wrlock, px.RwLock.rdlock, px.RwLock.try_rdlock,
            _leave_read, lambda lk: lk.writer, lambda lk: [lk.try_rdlock, lk.try_wrlock],
            lambda lk: [lk.rdunlock, lk.wrunlock], 1, True),
]
locks = pytest.mark.parametrize("k", LOCKS, ids=repr)


def _told_or_got(wait, h):
    """wait(h): "told" when it raised OwnerDiedError (holding it), else "got"."""
    try:
        assert wait(h) is not False
    except px.OwnerDiedError:
        return "told"
    return "got"


@locks
def test_owner_death_hands_it_over_with_eownerdead_and_tells_later_waits(k):
    """A fiber ends holding it: the first waiter gets it with OwnerDiedError,
    later waits are told as the lock says (a mutex: no more; an rwlock's
    readers: until a writer takes it).  With nobody waiting at the death, it is
    free, and the wait (or its try form) after it is told the same way."""
    def body():
        h = k.make()

        def dying():
            k.arm(h)
            until(lambda: h.waiters == k.waiters, "they all wait")
        d = px.spawn(dying)
        until(lambda: k.holder(h) == d.id, "it holds")
        got = []

        def waiter():
            got.append(_told_or_got(k.wait, h))
            k.leave(h)
        ws = [px.spawn(waiter) for _ in range(k.waiters)]
        d.join()                        # ended holding it
        for w in ws:
            w.join()
        later = "told" if k.told_later else "got"
        assert got == ["told"] + [later] * (k.waiters - 1)     # handed over at the death
        assert _told_or_got(k.wait, h) == later
        k.leave(h)
        for wait in (k.wait, k.try_wait):
            h = k.make()
            px.spawn(k.arm, h).join()
            assert k.holder(h) is None  # released as it ended
            assert _told_or_got(wait, h) == "told"
            k.leave(h)
            assert _told_or_got(wait, h) == later
            k.leave(h)
    run(body)


@locks
def test_try_forms_take_a_free_one_and_refuse_a_held_one_without_parking(k):
    """A free one is taken (a mutex: held by the caller); a held one is
    refused, by another fiber, and so it stays while a waiter is queued."""
    def body():
        h = k.make()
        for take, undo in zip(k.tries(h), k.untries(h)):
            assert take() is True
            if k.group == "mutex":
                assert h.owner == px.current_id()
            undo()
        k.arm(h)

        def refused():
            return [take() for take in k.tries(h)]
        assert px.spawn(refused).join() == [False] * len(k.tries(h))
        assert h.waiters == 0
        w = px.spawn(lambda: (k.wait(h), k.leave(h)))
        parked(w, lambda: h.waiters == 1)
        assert px.spawn(refused).join() == [False] * len(k.tries(h))
        assert h.waiters == 1           # the waiter only
        k.untries(h)[-1]()              # the arm's hold: unlock, wrunlock
        w.join()
        assert h.waiters == 0
    run(body)


# -- RwLock ------------------------------------------------------------------------------

@rwlock
def test_any_number_of_readers_hold_it_together():
    def body():
        lk, gate = px.RwLock(), px.Event()

        def reader():
            with lk.read():
                gate.wait()
        fs = [px.spawn(reader) for _ in range(5)]
        until(lambda: lk.readers == 5, "five readers")
        assert lk.writer is None and lk.waiters == 0
        gate.set()
        for f in fs:
            f.join()
        assert lk.readers == 0
    run(body)


@rwlock
def test_a_writer_excludes_readers_and_other_writers():
    def body():
        lk = px.RwLock()
        with lk.write():
            assert lk.writer == px.current_id()
            r = px.spawn(lambda: (lk.rdlock(), lk.rdunlock()))
            w = px.spawn(lambda: (lk.wrlock(), lk.wrunlock()))
            parked(w, lambda: lk.waiters == 2)
            assert lk.readers == 0
        r.join()
        w.join()
        assert lk.waiters == 0 and lk.writer is None and lk.readers == 0
    run(body)


@rwlock
def test_writer_preference_orders_a_in_a_out_w_in_w_out_r_in_r_out():
    def body():
        lk, log, gate = px.RwLock(), [], px.Event()

        def a():
            with lk.read():
                log.append("a in")
                gate.wait()
                log.append("a out")

        def w():
            with lk.write():
                log.append("w in")
            log.append("w out")

        def r():
            with lk.read():
                log.append("r in")
            log.append("r out")
        fa = px.spawn(a)
        until(lambda: lk.readers == 1, "a reads")
        fw = px.spawn(w)
        parked(fw, lambda: lk.waiters == 1)
        fr = px.spawn(r)                # a writer waits: the new reader queues behind it
        parked(fr, lambda: lk.waiters == 2)
        assert px.spawn(lk.try_rdlock).join() is False
        gate.set()
        for f in (fa, fw, fr):
            f.join()
        assert log == ["a in", "a out", "w in", "w out", "r in", "r out"]
    run(body)


@rwlock
def test_readers_queued_behind_a_writer_are_admitted_together():
    def body():
        lk, gate = px.RwLock(), px.Event()
        lk.wrlock()

        def reader():
            with lk.read():
                gate.wait()
        fs = [px.spawn(reader) for _ in range(3)]
        parked(fs[-1], lambda: lk.waiters == 3)
        lk.wrunlock()
        assert lk.readers == 3 and lk.waiters == 0     # all admitted by the one release
        gate.set()
        for f in fs:
            f.join()
    run(body)


@rwlock
def test_writers_are_served_in_fifo_order_by_direct_hand_off():
    def body():
        lk, log = px.RwLock(), []
        lk.wrlock()

        def writer(i):
            with lk.write():
                log.append(i)
        fs = [px.spawn(writer, i) for i in range(4)]
        parked(fs[-1], lambda: lk.waiters == 4)
        lk.wrunlock()
        assert lk.writer == fs[0].id    # handed over before it ran
        for f in fs:
            f.join()
        assert log == [0, 1, 2, 3]
    run(body)


@rwlock
def test_read_side_is_reentrant_even_with_a_writer_waiting():
    def body():
        lk = px.RwLock()
        lk.rdlock()
        w = px.spawn(lambda: (lk.wrlock(), lk.wrunlock()))
        parked(w, lambda: lk.waiters == 1)
        lk.rdlock()                     # the caller holds read holds: at once
        assert lk.try_rdlock()
        lk.rdunlock()
        lk.rdunlock()
        lk.rdunlock()
        w.join()
    run(body)


@rwlock
def test_the_writer_may_take_read_holds_but_not_a_second_write_lock():
    def body():
        lk = px.RwLock()
        lk.wrlock()
        lk.rdlock()
        with pytest.raises(px.DeadlockError):
            lk.wrlock()
        with pytest.raises(px.DeadlockError):
            lk.try_wrlock()
        lk.rdunlock()
        lk.wrunlock()
    run(body)


@rwlock
def test_upgrade_from_read_to_write_is_edeadlk_without_parking():
    def body():
        lk = px.RwLock()
        with lk.read():
            with pytest.raises(px.DeadlockError):
                lk.wrlock()
            with pytest.raises(px.DeadlockError):
                with lk.write():
                    pass
            assert lk.waiters == 0 and lk.readers == 1
        assert lk.readers == 0
    run(body)


@rwlock
def test_wrunlock_keeps_the_writers_read_holds_as_a_downgrade():
    def body():
        lk = px.RwLock()
        lk.wrlock()
        lk.rdlock()
        lk.wrunlock()
        assert lk.writer is None and lk.readers == 1
        assert px.spawn(lk.try_wrlock).join() is False
        assert px.spawn(lambda: (lk.rdlock(), lk.rdunlock())).join() == (None, None)
        lk.rdunlock()
    run(body)


@rwlock
def test_try_forms_never_park_and_never_pass_a_queued_waiter():
    def body():
        lk = px.RwLock()
        lk.rdlock()
        w = px.spawn(lambda: (lk.wrlock(), lk.wrunlock()))
        parked(w, lambda: lk.waiters == 1)
        assert px.spawn(lk.try_rdlock).join() is False
        assert px.spawn(lk.try_wrlock).join() is False
        lk.rdunlock()
        w.join()
    run(body)


@rwlock
def test_releasing_a_hold_the_caller_does_not_have_is_eperm():
    def body():
        lk = px.RwLock()
        with pytest.raises(px.NotOwnerError):
            lk.rdunlock()
        with pytest.raises(px.NotOwnerError):
            lk.wrunlock()
        lk.rdlock()
        assert outcome(px.spawn(lk.rdunlock)) is px.NotOwnerError
        with pytest.raises(px.NotOwnerError):
            lk.wrunlock()
        lk.rdunlock()
    run(body)


@rwlock
def test_timed_out_writer_leaves_no_waiter_and_lets_the_readers_behind_it_in():
    def body():
        lk = px.RwLock()
        lk.rdlock()

        def writer():
            with px.timeout(0.05):
                lk.wrlock()
        w = px.spawn(writer)
        parked(w, lambda: lk.waiters == 1)
        r = px.spawn(lambda: (lk.rdlock(), lk.rdunlock()))
        parked(r, lambda: lk.waiters == 2)
        assert outcome(w) is px.Timeout
        r.join()                        # let in once the writer left
        assert lk.waiters == 0 and lk.readers == 1
        lk.rdunlock()
    run(body)


@rwlock
def test_dead_writer_releases_its_holds_and_the_next_writer_gets_eownerdead():
    def body():
        lk = px.RwLock()

        def die():
            lk.wrlock()
            lk.rdlock()
        px.spawn(die).join()
        assert lk.writer is None and lk.readers == 0
        with pytest.raises(px.OwnerDiedError):
            lk.wrlock()
        assert lk.writer == px.current_id()
        lk.wrunlock()
        lk.wrlock()                     # a writer took it: told no more
        lk.wrunlock()
    run(body)


@rwlock
def test_readers_after_a_dead_writer_get_eownerdead_until_a_writer_takes_it():
    def body():
        lk = px.RwLock()
        px.spawn(lk.wrlock).join()
        for _ in range(2):
            with pytest.raises(px.OwnerDiedError):
                lk.rdlock()
            assert lk.readers == 1      # the hold is taken
            lk.rdunlock()
        with pytest.raises(px.OwnerDiedError):
            lk.wrlock()
        lk.wrunlock()
        lk.rdlock()
        lk.rdunlock()
    run(body)


@rwlock
def test_dead_reader_releases_all_its_read_holds():
    def body():
        lk = px.RwLock()
        px.spawn(lambda: [lk.rdlock() for _ in range(3)]).join()
        assert lk.readers == 0
        lk.wrlock()                     # no death is told of readers
        lk.wrunlock()
    run(body)


@rwlock
def test_with_read_or_write_on_owner_death_releases_and_raises_and_strands_no_hold():
    def body():
        lk = px.RwLock()
        for hold in (lk.write, lk.read):
            px.spawn(lk.wrlock).join()  # ends holding the write lock
            ran = []
            with pytest.raises(px.OwnerDiedError):
                with hold():
                    ran.append("block")
            assert ran == []
            assert lk.writer is None and lk.readers == 0, lk
        with pytest.raises(px.OwnerDiedError):
            lk.wrlock()                 # the readers' with did not repair it: told
        lk.wrunlock()
        with lk.write():                # a writer took it since
            pass
        assert lk.writer is None
    run(body)


@rwlock
def test_wrunlock_right_after_an_interrupted_writer_goes_past_it_to_the_readers():
    def body():
        lk, tok = px.RwLock(), px.CancellationToken()
        lk.wrlock()
        c = parked_in_scope(tok, lk.wrlock, queued=lambda: lk.waiters == 1)

        def reader():
            lk.rdlock()
            lk.rdunlock()
            return "read"
        r1, r2 = px.spawn(reader), px.spawn(reader)
        until(lambda: lk.waiters == 3, "the readers queued")
        assert tok.cancel()             # c interrupted, still queued
        lk.wrunlock()
        assert lk.writer is None        # past c, which is leaving ...
        assert lk.readers == 2          # ... to the readers behind it
        assert lk.waiters == 0
        assert outcome(c) is px.Cancelled
        assert r1.join() == "read" and r2.join() == "read"
        assert lk.readers == 0 and lk.writer is None
    run(body)


@rwlock
def test_wrunlock_right_after_an_interrupted_reader_goes_past_it_to_the_writer():
    def body():
        lk, tok = px.RwLock(), px.CancellationToken()
        lk.wrlock()
        c = parked_in_scope(tok, lk.rdlock, queued=lambda: lk.waiters == 1)
        w = px.spawn(lambda: (lk.wrlock(), lk.wrunlock()))
        parked(w, lambda: lk.waiters == 2)
        assert tok.cancel()
        lk.wrunlock()
        assert lk.readers == 0          # past c, which is leaving,
        assert lk.writer == w.id        # to the writer behind it
        assert lk.waiters == 0
        assert outcome(c) is px.Cancelled
        w.join()
        assert lk.readers == 0 and lk.writer is None
    run(body)


@rwlock
def test_a_fiber_that_once_held_it_is_never_mistaken_for_a_new_fiber():
    def body():
        lk = px.RwLock()
        px.spawn(lambda: [lk.rdlock() for _ in range(3)]).join()   # three holds
        px.spawn(lambda: (lk.wrlock(), lk.rdlock())).join()

        def later():                    # on recycled fiber records
            assert lk.readers == 0
            with pytest.raises(px.NotOwnerError):
                lk.rdunlock()           # holds nothing
            with pytest.raises(px.NotOwnerError):
                lk.wrunlock()
            try:
                lk.wrlock()             # not an upgrade: no DeadlockError
            except px.OwnerDiedError:
                pass
            lk.wrunlock()
        for _ in range(64):
            px.spawn(later).join()
        assert lk.readers == 0 and lk.writer is None
    run(body)


@rwlock
def test_read_hold_beside_another_schedulers_readers_is_ethread():
    """Another run's main fiber holds a read hold, nobody waits: a read hold
    here would sit beside a foreign reader, a write lock would park on one."""
    lk = px.RwLock()
    stop = in_a_run_on_another_thread(lk.rdlock, lk.rdunlock)
    try:
        def body():
            for call in (lk.rdlock, lk.try_rdlock, lk.wrlock):
                with pytest.raises(px.WrongSchedulerError):
                    call()
            assert lk.try_wrlock() is False
            assert lk.readers == 1 and lk.waiters == 0
        run(body)
    finally:
        stop()
    assert lk.readers == 0


@rwlock
def test_random_locking_under_random_timeouts_keeps_exclusion_and_leaves_nothing_queued():
    """24 fibers take read holds (sometimes reentrant), write locks and a
    mutex at random, under random short timeouts, holding them across yields;
    the exclusion holds at every step, and at the end nothing is held or
    queued."""
    lk, sm = px.RwLock(), px.Mutex()
    st = {"write": 0, "read": 0, "mutex": False, "ops": 0, "timeouts": 0}

    def bounded(rng, lock):
        """lock() under a random timeout of under 300 us (a quarter unbounded):
        True when it got it."""
        if rng.randrange(4) == 0:
            lock()
            return True
        try:
            with px.timeout(rng.randrange(300) * 1e-6):
                lock()
            return True
        except px.Timeout:
            st["timeouts"] += 1
            return False

    def hold_for(rng):
        if rng.randrange(8) == 0:
            px.sleep(50e-6)             # long enough for timeouts to fire
        for _ in range(rng.randrange(3)):
            px.yield_()

    def read(rng):
        if not bounded(rng, lk.rdlock):
            return
        assert st["write"] == 0
        st["read"] += 1
        if rng.randrange(2):
            lk.rdlock()                 # reentrant: at once
        else:
            assert lk.try_rdlock()
        with pytest.raises(px.DeadlockError):
            lk.wrlock()
        hold_for(rng)
        assert st["write"] == 0
        st["read"] -= 1
        lk.rdunlock()
        lk.rdunlock()

    def write(rng):
        if not bounded(rng, lk.wrlock):
            return
        assert st["write"] == 0 and st["read"] == 0 and lk.readers == 0
        st["write"] = 1
        hold_for(rng)
        assert st["read"] == 0
        st["write"] = 0
        lk.wrunlock()

    def lock_mutex(rng):
        if not bounded(rng, sm.lock):
            return
        assert not st["mutex"]
        st["mutex"] = True
        assert sm.owner == px.current_id()
        hold_for(rng)
        st["mutex"] = False
        sm.unlock()

    def soaker(seed):
        rng = random.Random(seed)
        for _ in range(1000):
            (read, write, lock_mutex)[rng.randrange(3)](rng)
            st["ops"] += 1
            if rng.randrange(2):
                px.yield_()

    def body():
        for f in [px.spawn(soaker, i * 7919 + 1) for i in range(24)]:
            f.join()
    run(body)
    assert st["ops"] == 24 * 1000
    assert st["timeouts"] > 0, "no timeout fired"
    assert lk.readers == 0 and lk.writer is None and lk.waiters == 0
    assert sm.owner is None and sm.waiters == 0


@rwlock
def test_deadlock_report_names_readers_and_writer_and_prints_the_cycle():
    ids = {}

    def main():
        lk, m = px.RwLock(), px.Mutex()

        def reader():                   # reads, then waits for the mutex
            try:
                with lk.read():
                    px.yield_()
                    with m:
                        pass
            except px.Cancelled:
                pass

        def locker():                   # holds the mutex, then wants to write
            try:
                with m:
                    px.yield_()
                    with lk.write():
                        pass
            except px.Cancelled:
                pass
        f, g = px.spawn(reader), px.spawn(locker)
        ids["r"], ids["w"] = f.number, g.number
        f.join()
        g.join()
    with pytest.raises(px.DeadlockError) as e:
        px.run(main)
    report = str(e.value)
    assert '"RwLock write lock"' in report and '"Mutex lock"' in report, report
    assert f"fiber {ids['r']} " in report and f"held by fiber {ids['w']} " in report, report
    assert "wait-for cycle" in report, report


# -- WaitGroup ------------------------------------------------------------------------------

@waitgroup
def test_wait_at_zero_returns_at_once():
    run(lambda: px.WaitGroup().wait())


@waitgroup
def test_wait_parks_until_the_last_job_is_done():
    def body():
        wg, log = px.WaitGroup(), []
        wg.add(3)

        def job(i):
            px.yield_()
            log.append(i)
            wg.done()
        for i in range(3):
            px.spawn(job, i)
        wg.wait()
        assert sorted(log) == [0, 1, 2] and wg.count == 0
    run(body)


@waitgroup
def test_top_up_while_waiting_keeps_the_waiter_parked_until_zero():
    def body():
        wg = px.WaitGroup()
        wg.add(1)
        w = px.spawn(wg.wait)
        parked(w)
        wg.add(2)
        wg.done()
        wg.done()
        settle()
        assert not w.done and wg.count == 1
        wg.done()
        w.join()
    run(body)


@waitgroup
def test_calls_that_need_no_fiber_work_off_fiber_and_waits_stay_enofiber():
    """As C's steps: add and done need no fiber; after each, wait is still
    refused off-fiber and the count is what the step made it."""
    wg = px.WaitGroup()
    for step, count in ((lambda: wg.add(2), 2), (wg.done, 1), (lambda: wg.add(0), 1),
                        (wg.done, 0)):
        step()
        assert wg.count == count
        with pytest.raises(px.NoFiberError):
            wg.wait()
        assert wg.count == count


@waitgroup
def test_cancelled_wait_leaves_nothing_queued():
    def body():
        wg, tok = px.WaitGroup(), px.CancellationToken()
        wg.add(1)
        c = parked_in_scope(tok, wg.wait)
        tok.cancel()
        assert outcome(c) is px.Cancelled
        assert wg.count == 1            # the count is not touched
        wg.done()
        wg.wait()                       # at zero: at once, nobody left queued
    run(body)


@waitgroup
def test_going_below_zero_is_einval_and_leaves_the_count_unchanged():
    def body():
        wg = px.WaitGroup()
        with pytest.raises(px.InvalidArgument):
            wg.done()
        wg.add(2)
        with pytest.raises(px.InvalidArgument):
            wg.add(-3)
        assert wg.count == 2
        wg.add(-2)
        assert wg.count == 0
    run(body)


@waitgroup
def test_a_waiter_released_at_zero_returns_even_if_the_count_rises_again():
    def body():
        wg = px.WaitGroup()
        wg.add(1)
        w = px.spawn(wg.wait)
        parked(w)
        wg.done()
        wg.add(1)                       # before the waiter ran
        w.join()
        wg.done()
    run(body)


# -- Barrier ----------------------------------------------------------------------------------

@barrier
def test_zero_parties_is_refused_with_einval():
    with pytest.raises(ValueError):
        px.Barrier(0)
    with pytest.raises(TypeError):
        px.Barrier(2.0)


@barrier
def test_lockstep_over_three_generations_with_a_slow_party():
    def body():
        b, log = px.Barrier(3), []

        def party(i):
            for gen in range(3):
                if i == 2:
                    for _ in range(5):
                        px.yield_()     # the slow one: the others wait for it
                log.append(gen)
                b.arrive_and_wait()
        fs = [px.spawn(party, i) for i in range(3)]
        for f in fs:
            f.join()
        assert log == [0] * 3 + [1] * 3 + [2] * 3 and b.phase == 3
    run(body)


@barrier
def test_exactly_one_leader_per_phase():
    def body():
        b = px.Barrier(4)

        def party():
            return [b.arrive_and_wait() for _ in range(5)]
        rows = [px.spawn(party) for _ in range(4)]
        results = [f.join() for f in rows]
        for phase in range(5):
            assert sum(r[phase] for r in results) == 1
        assert b.phase == 5
    run(body)


@barrier
def test_the_last_arrival_leads_without_parking_and_the_others_get_0():
    def body():
        b = px.Barrier(3)
        fs = [px.spawn(b.arrive_and_wait) for _ in range(2)]
        until(lambda: b.waiting == 2, "two arrived")
        assert b.arrive_and_wait() is True      # did not park: the phase is over
        assert b.phase == 1 and b.waiting == 0
        assert [f.join() for f in fs] == [False, False]
    run(body)


@barrier
def test_phases_never_mix_a_fast_rearrival_waits_for_the_next_phase():
    def body():
        b = px.Barrier(2)
        f = px.spawn(lambda: (b.arrive_and_wait(), b.arrive_and_wait()))
        until(lambda: b.waiting == 1, "the fiber arrived")
        assert b.arrive_and_wait() is True
        until(lambda: b.waiting == 1, "it arrived again, in phase 1")
        assert b.phase == 1 and not f.done
        assert b.arrive_and_wait() is True
        assert f.join() == (False, False)
    run(body)


@barrier
def test_timed_out_arrival_withdraws_its_count():
    def body():
        b = px.Barrier(2)

        def late():
            with px.timeout(0.05):
                b.arrive_and_wait()
        assert outcome(px.spawn(late)) is px.Timeout
        assert b.waiting == 0 and b.phase == 0
        f = px.spawn(b.arrive_and_wait)
        until(lambda: b.waiting == 1, "a new arrival")
        assert b.arrive_and_wait() is True and f.join() is False
    run(body)


@barrier
def test_cancelled_arrival_withdraws_its_count_even_before_it_runs_again():
    def body():
        b, tok = px.Barrier(2), px.CancellationToken()
        f = parked_in_scope(tok, b.arrive_and_wait, queued=lambda: b.waiting == 1)
        cancel_from_thread(tok)
        g = px.spawn(b.arrive_and_wait)      # not counted with the cancelled one
        assert outcome(f) is px.Cancelled
        until(lambda: b.waiting == 1, "the new arrival waits alone")
        assert b.arrive_and_wait() is True and g.join() is False
        assert b.phase == 1
    run(body)


@barrier
def test_a_one_party_barrier_always_leads():
    def body():
        b = px.Barrier(1)
        assert [b.arrive_and_wait() for _ in range(3)] == [True] * 3 and b.phase == 3
    run(body)


# -- Once ------------------------------------------------------------------------------------

@once
def test_runs_the_action_once_among_5_racers_who_wait_for_it():
    def body():
        once, calls = px.Once(), []

        def action():
            calls.append(px.current_id())
            for _ in range(5):
                px.yield_()             # the others arrive meanwhile and wait
            return "ran"
        fs = [px.spawn(once.do, action) for _ in range(5)]
        results = [f.join() for f in fs]
        assert calls == [fs[0].id]
        assert results == ["ran"] + [None] * 4 and once.done
    run(body)


@once
def test_later_callers_return_at_once_without_running_it():
    def body():
        once = px.Once()
        assert once.do(lambda x: x * 2, 21) == 42
        assert once.do(pytest.fail, "ran again") is None
        assert px.spawn(once.do, pytest.fail).join() is None
    run(body)


@once
def test_a_failed_action_is_done_and_never_retried():
    def body():
        once = px.Once()

        def fail():
            px.yield_()
            raise KeyError("action")
        f = px.spawn(once.do, fail)
        g = px.spawn(once.do, pytest.fail)
        with pytest.raises(KeyError):
            f.join()                    # raised in the runner ...
        assert g.join() is None         # ... and the waiter just returns
        assert once.done and once.do(pytest.fail) is None
    run(body)


@once
def test_a_runner_ending_inside_the_action_ends_it():
    def body():
        once, tok = px.Once(), px.CancellationToken()

        def runner():
            with px.cancel_scope(tok):
                once.do(px.Event().wait)
        r = px.spawn(runner)
        settle()
        w = px.spawn(once.do, pytest.fail)
        parked(w)
        cancel_from_thread(tok)
        assert outcome(r) is px.Cancelled
        assert w.join() is None and once.done
    run(body)


@once
def test_reentrant_do_from_inside_the_action_is_edeadlk():
    def body():
        once = px.Once()
        with pytest.raises(px.DeadlockError):
            once.do(lambda: once.do(pytest.fail))
        assert once.done
    run(body)


@once
def test_done_works_anywhere_and_do_without_an_action_is_einval():
    """Off-fiber: done reads; do without an action is refused (Python's
    TypeError for the missing argument: C's and Lua's EINVAL) and leaves it
    not done."""
    once = px.Once()
    assert once.done is False
    with pytest.raises(TypeError):
        once.do()
    assert once.done is False


@once
def test_deadlock_report_names_the_runner_and_prints_the_cycle():
    ids = {}

    def main():
        once, m = px.Once(), px.Mutex()

        def holder():                   # holds the mutex, then waits for the action
            try:
                with m:
                    until(lambda: m.waiters == 1, "the runner waits for the mutex")
                    once.do(pytest.fail)
            except px.Cancelled:
                pass

        def runner():                   # its action wants the mutex
            try:
                once.do(m.lock)
            except px.Cancelled:
                pass
        g = px.spawn(holder)
        until(lambda: m.owner == g.id, "the holder holds")
        f = px.spawn(runner)
        ids["runner"], ids["holder"] = f.number, g.number
        f.join()
        g.join()
    with pytest.raises(px.DeadlockError) as e:
        px.run(main)
    report = str(e.value)
    assert '"Once init"' in report and '"Mutex lock"' in report, report
    assert (f"fiber {ids['runner']} " in report
            and f"held by fiber {ids['holder']} " in report), report


# -- Semaphore ---------------------------------------------------------------------------------

@sem
def test_acquire_takes_a_free_unit_at_once_and_tryacquire_refuses_when_none():
    def body():
        s = px.Semaphore(2)
        s.acquire()
        assert s.try_acquire() and s.value == 0
        assert s.try_acquire() is False
        s.release()
        s.release()
        assert s.value == 2
        with pytest.raises(ValueError):
            px.Semaphore(-1)
    run(body)


@sem
def test_at_most_initial_fibers_hold_units_at_once():
    def body():
        s, inside, most = px.Semaphore(3), [0], [0]

        def user():
            for _ in range(5):
                with s:
                    inside[0] += 1
                    most[0] = max(most[0], inside[0])
                    px.yield_()
                    inside[0] -= 1
        for f in [px.spawn(user) for _ in range(8)]:
            f.join()
        assert most[0] == 3 and s.value == 3
    run(body)


@sem
def test_release_hands_the_unit_to_the_first_waiter_and_tryacquire_never_steals_it():
    def body():
        s = px.Semaphore(0)
        f = px.spawn(s.acquire)
        parked(f, lambda: s.waiters == 1)
        s.release()
        assert s.value == 0 and s.waiters == 0      # handed over, not counted
        assert s.try_acquire() is False
        f.join()
    run(body)


@sem
def test_timed_out_acquire_leaves_no_waiter_and_takes_nothing():
    def body():
        s = px.Semaphore(0)
        with pytest.raises(px.Timeout):
            with px.timeout(0.05):
                s.acquire()
        assert s.waiters == 0 and s.value == 0
        s.release()
        assert s.value == 1
    run(body)


@sem
def test_interrupted_acquire_passes_a_raced_unit_to_the_next_waiter():
    def body():
        s, tok = px.Semaphore(0), px.CancellationToken()
        a = parked_in_scope(tok, s.acquire, queued=lambda: s.waiters == 1)
        b = px.spawn(s.acquire)
        parked(b, lambda: s.waiters == 2)
        tok.cancel()
        s.release()
        assert outcome(a) is px.Cancelled
        b.join()
        assert s.value == 0 and s.waiters == 0
    run(body)


@sem
def test_interrupted_acquire_passes_a_raced_unit_back_to_the_count():
    def body():
        s, tok = px.Semaphore(0), px.CancellationToken()
        a = parked_in_scope(tok, s.acquire, queued=lambda: s.waiters == 1)
        tok.cancel()
        s.release()
        assert outcome(a) is px.Cancelled
        assert s.value == 1 and s.waiters == 0
    run(body)


@sem
def test_with_holds_one_unit_and_gives_it_back_on_an_exception():
    def body():
        s = px.Semaphore(1)
        with pytest.raises(KeyError):
            with s:
                assert s.value == 0
                raise KeyError
        assert s.value == 1
        with pytest.raises(px.Timeout):
            with s:
                with px.timeout(0.01):
                    s.acquire()
        assert s.value == 1 and s.waiters == 0
    run(body)


# -- Event ----------------------------------------------------------------------------------------

@event
def test_wait_after_set_returns_at_once_and_keeps_returning():
    def body():
        e = px.Event()
        e.set()
        for _ in range(3):
            e.wait()
        assert e.is_set()
    run(body)


@event
def test_clear_makes_wait_park_again_until_the_next_set():
    def body():
        e = px.Event()
        e.set()
        e.clear()
        assert not e.is_set()
        w = px.spawn(e.wait)
        parked(w)
        assert e.set() == 1
        w.join()
    run(body)


@event
def test_a_waiter_woken_by_set_returns_0_even_if_cleared_before_it_ran():
    def body():
        e = px.Event()
        ws = [px.spawn(e.wait) for _ in range(3)]
        settle()
        assert e.set() == 3
        e.clear()
        for w in ws:
            w.join()
    run(body)


# -- Channel ----------------------------------------------------------------------------------------

@chan
def test_values_come_out_in_the_order_they_went_in():
    def body():
        for cap in (0, 1, 3):
            ch = px.Channel(cap)
            px.spawn(lambda: ([ch.send(i) for i in range(10)], ch.close()))
            assert list(ch) == list(range(10))
    run(body)


@chan
def test_values_are_any_values_of_the_language_and_keep_their_identity():
    def body():
        objs = [object(), None, [1, 2], {"k": "v"}, (), "s", 3.5, KeyError("x")]
        for cap in (0, 2, 16):
            ch = px.Channel(cap)
            px.spawn(lambda: ([ch.send(o) for o in objs], ch.close()))
            got = list(ch)
            assert len(got) == len(objs) and all(a is b for a, b in zip(got, objs))
        ch = px.Channel(1)
        assert ch.try_send(None) and ch.try_recv() == (True, None)   # None is a value
    run(body)


@chan
def test_buffered_send_parks_only_while_the_channel_is_full():
    def body():
        ch = px.Channel(2)
        ch.send("a")
        ch.send("b")
        assert len(ch) == 2
        s = px.spawn(ch.send, "c")
        parked(s)
        assert ch.recv() == "a"
        s.join()
        assert [ch.recv(), ch.recv()] == ["b", "c"]
    run(body)


@chan
def test_unbuffered_send_completes_only_when_a_receiver_takes_the_value():
    def body():
        ch, log = px.Channel(), []

        def sender():
            ch.send("v")
            log.append("sent")
        s = px.spawn(sender)
        parked(s)
        assert log == [] and len(ch) == 0
        assert ch.recv() == "v"
        s.join()
        assert log == ["sent"]
    run(body)


@chan
def test_recv_parks_until_a_value_is_handed_to_it():
    def body():
        ch = px.Channel(4)
        r = px.spawn(ch.recv)
        parked(r)
        ch.send("x")                    # handed to the waiting receiver, not buffered
        assert len(ch) == 0
        assert r.join() == "x"
    run(body)


@chan
def test_trysend_and_tryrecv_never_park_buffered_or_not():
    def body():
        ch = px.Channel()
        assert ch.try_send(1) is False  # no receiver waits
        assert ch.try_recv() == (False, None)
        r = px.spawn(ch.recv)
        parked(r)
        assert ch.try_send(2) is True and r.join() == 2
        s = px.spawn(ch.send, 3)
        parked(s)
        assert ch.try_recv() == (True, 3)
        s.join()
        b = px.Channel(1)
        assert b.try_send(4) and b.try_send(5) is False
        assert b.try_recv() == (True, 4) and b.try_recv() == (False, None)
    run(body)


@chan
def test_close_lets_receivers_drain_the_buffer_then_gives_eclosed():
    def body():
        ch = px.Channel(3)
        for v in "abc":
            ch.send(v)
        ch.close()
        assert ch.closed and [ch.recv(), ch.try_recv()] == ["a", (True, "b")]
        assert list(ch) == ["c"]        # iteration ends: closed and drained
        with pytest.raises(px.Closed):
            ch.recv()
        with pytest.raises(px.Closed):
            ch.try_recv()
    run(body)


@chan
def test_after_close_senders_and_a_second_close_get_eclosed():
    def body():
        ch = px.Channel(1)
        ch.close()
        with pytest.raises(px.Closed):
            ch.send(1)
        with pytest.raises(px.Closed):
            ch.try_send(1)
        with pytest.raises(px.Closed):
            ch.close()
        assert len(ch) == 0
    run(body)


@chan
def test_close_wakes_parked_receivers_with_eclosed():
    def body():
        ch = px.Channel()
        rs = [px.spawn(ch.recv) for _ in range(3)]
        settle()
        ch.close()
        assert [outcome(r) for r in rs] == [px.Closed] * 3
    run(body)


@chan
def test_close_wakes_parked_senders_with_eclosed_and_their_values_unsent():
    def body():
        ch = px.Channel(1)
        ch.send("kept")
        ss = [px.spawn(ch.send, i) for i in range(3)]
        settle()
        ch.close()
        assert [outcome(s) for s in ss] == [px.Closed] * 3
        assert list(ch) == ["kept"]
        assert ch._values == {}         # nothing of the unsent values is kept
    run(body)


@chan
def test_four_producers_four_consumers_lose_nothing_duplicate_nothing_keep_order():
    def body():
        for cap in (0, 3):
            ch, done = px.Channel(cap), px.WaitGroup()
            got = [[] for _ in range(4)]

            def producer(p):
                for i in range(200):
                    ch.send((p, i))
                done.done()

            def consumer(c):
                for v in ch:
                    got[c].append(v)
            done.add(4)
            ps = [px.spawn(producer, p) for p in range(4)]
            cs = [px.spawn(consumer, c) for c in range(4)]
            done.wait()
            ch.close()
            for f in ps + cs:
                f.join()
            every = sorted(v for g in got for v in g)
            assert every == sorted((p, i) for p in range(4) for i in range(200))
            for g in got:               # each producer's values in order
                for p in range(4):
                    mine = [i for q, i in g if q == p]
                    assert mine == sorted(mine)
            assert ch._values == {}
    run(body)


@chan
def test_interrupted_sends_and_recvs_under_4x4_lose_and_duplicate_nothing():
    def body():
        ch = px.Channel(1)
        sent, got = [], []

        def producer(p):
            for i in range(100):
                try:
                    with px.move_on_after(0.0005 * (i % 3)) as scope:
                        ch.send((p, i))
                    if not scope.expired:
                        sent.append((p, i))
                except px.Timeout:
                    pass
                px.yield_()

        def consumer():
            while True:
                try:
                    with px.move_on_after(0.001):
                        got.append(ch.recv())
                except px.Closed:
                    return
        ps = [px.spawn(producer, p) for p in range(4)]
        cs = [px.spawn(consumer) for _ in range(4)]
        for f in ps:
            f.join()
        ch.close()
        for f in cs:
            f.join()
        assert sorted(got) == sorted(sent) and len(set(got)) == len(got)
        assert ch._values == {}
    run(body)


@chan
def test_timed_out_send_sends_nothing_and_timed_out_recv_takes_nothing():
    def body():
        ch = px.Channel()
        with pytest.raises(px.Timeout):
            with px.timeout(0.02):
                ch.send("lost?")
        with pytest.raises(px.Timeout):
            with px.timeout(0.02):
                ch.recv()
        assert ch.try_recv() == (False, None) and ch._values == {}
        b = px.Channel(1)
        b.send("first")
        with pytest.raises(px.Timeout):
            with px.timeout(0.02):
                b.send("second")
        assert b.recv() == "first" and b.try_recv() == (False, None)
    run(body)


@chan
def test_cancelled_recv_racing_a_send_takes_nothing_and_the_value_goes_on():
    def body():
        ch, tok = px.Channel(), px.CancellationToken()
        a = parked_in_scope(tok, ch.recv)
        b = px.spawn(ch.recv)
        parked(b)
        tok.cancel()
        ch.send("v")                    # before A ran again: goes to B
        assert outcome(a) is px.Cancelled
        assert b.join() == "v"
    run(body)


@chan
def test_cancelled_send_racing_a_recv_sends_nothing():
    def body():
        ch, tok = px.Channel(), px.CancellationToken()
        a = parked_in_scope(tok, ch.send, "a")
        b = px.spawn(ch.send, "b")
        parked(b)
        tok.cancel()
        assert ch.recv() == "b"         # A is leaving: its value was not sent
        assert outcome(a) is px.Cancelled
        b.join()
        assert ch.try_recv() == (False, None) and ch._values == {}
    run(body)


@chan
def test_a_channel_without_a_capacity_is_unbuffered():
    def body():
        ch = px.Channel()               # Channel(0), as documented
        assert ch.capacity == 0
        assert ch.try_send(1) is False
        px.spawn(ch.send, "v")
        assert ch.recv() == "v"
    run(body)


@chan
def test_iteration_ends_when_closed_and_drained():
    def body():
        ch = px.Channel(2)

        def feed():
            for v in range(5):
                ch.send(v)
            ch.close()
        px.spawn(feed)
        assert [v * 10 for v in ch] == [0, 10, 20, 30, 40]
        assert list(ch) == []
    run(body)


@chan
def test_channel_arguments_are_checked():
    with pytest.raises(ValueError):
        px.Channel(-1)
    with pytest.raises(TypeError):
        px.Channel("1")
