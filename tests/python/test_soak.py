"""Many fibers doing random operations on mutexes, an rwlock, a semaphore and
a channel, each wait bounded by a random timeout or interrupted by a random
cancel, mirroring tests/c/sync/soak.c (and the Lua suite's soak): the
invariants hold all along (mutual exclusion, reader/writer exclusion, the
semaphore's bound), and at the end nothing is held or queued and every value
sent was received exactly once.

The seed fixes the choices; which waits time out depends on the clock as well.
"""
import random

import pytest

import parataxis as px

pytestmark = pytest.mark.group("soak")     # tests/behaviours.txt: soak.<name>

FIBERS, OPS, MUTEXES, SEM_UNITS, CHAN_CAP = 64, 400, 3, 2, 4


def test_random_operations_keep_every_invariant():
    rnd = random.Random(1).randrange
    mtx, inside = [px.Mutex() for _ in range(MUTEXES)], [0] * MUTEXES
    rw, state = px.RwLock(), {"readers": 0, "writers": 0, "sem_in": 0,
                              "next": 1, "granted": 0, "interrupted": 0}
    sem = px.Semaphore(SEM_UNITS)
    ch, sent, received = px.Channel(CHAN_CAP), set(), set()
    tokens = [px.CancellationToken() for _ in range(FIBERS)]

    def dwell():
        """Holds for a random while: yields, or a short sleep, which the
        scope around the operation may interrupt (the hold goes on)."""
        k = rnd(4)
        if k == 3:
            try:
                px.sleep(rnd(200) * 1e-6)
            except (px.Timeout, px.Cancelled):
                pass
        else:
            for _ in range(k):
                px.yield_()

    def on_mutex():
        i = rnd(MUTEXES)
        mtx[i].lock()
        assert mtx[i].owner == px.current_id()
        assert inside[i] == 0
        inside[i] = 1
        dwell()
        inside[i] = 0
        mtx[i].unlock()

    def on_read():
        rw.rdlock()
        assert state["writers"] == 0
        state["readers"] += 1
        dwell()
        state["readers"] -= 1
        rw.rdunlock()

    def on_write():
        rw.wrlock()
        assert state["readers"] == 0 and state["writers"] == 0
        assert rw.writer == px.current_id()
        state["writers"] = 1
        dwell()
        state["writers"] = 0
        rw.wrunlock()

    def on_sem():
        sem.acquire()
        state["sem_in"] += 1
        assert state["sem_in"] <= SEM_UNITS
        dwell()
        state["sem_in"] -= 1
        sem.release()

    def on_send():                          # each value sent at most once
        v = state["next"]
        state["next"] += 1
        ch.send(v)
        sent.add(v)

    def on_recv():
        v = ch.recv()
        assert 0 < v < state["next"]
        assert v not in received
        received.add(v)

    ops = [on_mutex, on_read, on_write, on_sem, on_send, on_recv]

    def one_op(me):
        """One operation, bounded by a timeout or by this fiber's token (which
        other fibers cancel at random), or not bounded (a channel wait may
        have no partner left: always bounded)."""
        k = rnd(6)
        how = 0 if k >= 4 else rnd(3)
        try:
            if how == 0:
                with px.timeout(rnd(300) * 1e-6):
                    ops[k]()
            elif how == 1:
                if tokens[me].cancelled:
                    tokens[me] = px.CancellationToken()
                with px.cancel_scope(tokens[me]):
                    ops[k]()
            else:
                ops[k]()
            state["granted"] += 1
        except (px.Timeout, px.Cancelled):
            state["interrupted"] += 1
        if rnd(8) == 0:
            tokens[rnd(FIBERS)].cancel()

    def main():
        fibers = [px.spawn(lambda me=me: [one_op(me) for _ in range(OPS)])
                  for me in range(FIBERS)]
        for f in fibers:
            f.join()
        while True:                         # what is left in the buffer
            ok, v = ch.try_recv()
            if not ok:
                break
            assert v not in received
            received.add(v)
        for m in mtx:
            assert m.owner is None and m.waiters == 0
        assert rw.readers == 0 and rw.writer is None and rw.waiters == 0
        assert sem.value == SEM_UNITS and sem.waiters == 0

    px.run(main)
    assert sent == received                 # nothing lost, nothing made up
    assert state["granted"] + state["interrupted"] == FIBERS * OPS
    assert state["granted"] > 0 and state["interrupted"] > 0   # both paths were exercised
