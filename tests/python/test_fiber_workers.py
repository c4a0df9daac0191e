"""Fibers run on worker greenlets that are kept for the next fiber (_host.c:
retire): what must hold however the greenlets are shared out."""
import gc
import sys

import pytest

px = pytest.importorskip("parataxis")
if not hasattr(px, "run"):
    pytest.skip("no fiber API", allow_module_level=True)


def test_many_parked_fibers_end_and_are_released():
    # 100,000 fibers parked at once, then all ending: each greenlet that ends
    # must not keep the next one alive (a chain of 100,000 greenlets freed
    # recursively overflowed the C stack).
    n = 100_000

    def main():
        ev, parked = px.Event(), [0]

        def wait():
            parked[0] += 1
            ev.wait()
        fs = [px.spawn(wait) for _ in range(n)]
        while parked[0] < n:
            px.yield_()
        ev.set()
        for f in fs:
            f.join()
        return len(fs)
    assert px.run(main) == n
    gc.collect()


def test_reused_worker_runs_each_fiber_with_its_own_result_and_id():
    def main():
        ids, out = set(), []
        for i in range(500):
            f = px.spawn(lambda i=i: (i, px.current_id()))
            r, me = f.join()
            out.append(r)
            assert me == f.id
            ids.add(f.id)
        return out, len(ids)
    out, distinct = px.run(main)
    assert out == list(range(500)) and distinct == 500


def test_exception_in_one_fiber_does_not_leak_into_the_next_on_its_worker():
    def boom():
        raise ValueError("first")

    def main():
        f = px.spawn(boom)
        with pytest.raises(ValueError, match="first"):
            f.join()
        g = px.spawn(lambda: sys.exc_info()[1])
        return g.join()
    assert px.run(main) is None


def test_idle_workers_are_not_fibers_and_end_with_the_run():
    # Workers left idle do not keep run() from returning, nor count in a
    # deadlock; a run after it starts afresh.
    def main():
        for f in [px.spawn(lambda: None) for _ in range(200)]:
            f.join()
        m = px.Mutex()
        m.lock()

        def take():
            try:
                m.lock()
            except px.Cancelled:        # the deadlock is unwound
                pass
        px.spawn(take).join()
    with pytest.raises(px.DeadlockError):
        px.run(main)
    assert px.run(lambda: 7) == 7


def test_fiber_left_parked_on_a_worker_unwinds_when_run_gives_up():
    # The main fiber's exception: the parked fibers (some on reused
    # workers) are cancelled and their finally blocks run.
    unwound = []

    def parked(i):
        try:
            px.Event().wait()
        except px.Cancelled:
            pass
        finally:
            unwound.append(i)

    def main():
        for _ in range(10):
            px.spawn(lambda: None).join()
        for i in range(10):
            px.spawn(parked, i)
        px.yield_()
        raise KeyError("main")
    with pytest.raises(KeyError):
        px.run(main)
    assert sorted(unwound) == list(range(10))
