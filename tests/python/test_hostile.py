"""The interrupted-waiter policy of the sync family where its pieces meet,
mirroring tests/c/sync/hostile.c (test_<behaviour> is the C spec of the same
name; the joiners' spec is in test_fibers.py).

Not here: hostile.c's grants made off-fiber while the run is stopped (its
px_sched_run back with PX_EDEADLK, then run again).  px.run cannot be stopped
and resumed, and no Python call grants off-fiber (NoFiberError; from another
thread C refuses a hand-over with PX_ETHREAD): see tests/behaviours.txt.
"""
import threading

import pytest

import parataxis as px
from parataxis._parataxis import lib
from sync_kit import TIMEOUT, run

pytestmark = pytest.mark.group("hostile")   # tests/behaviours.txt: hostile.<name>


def test_an_interrupted_then_stray_woken_waiter_is_passed_by_a_release():
    def body():
        s, tok = px.Semaphore(0), px.CancellationToken()

        def cancellable():
            try:
                with px.cancel_scope(tok):
                    s.acquire()
            except px.Cancelled:
                return px.Cancelled
            return "acquired"

        def plain():
            s.acquire()
            return "b"
        a = px.spawn(cancellable)
        b = px.spawn(plain)
        px.yield_()
        assert s.waiters == 2
        assert tok.cancel() is True         # a is interrupted, not run yet
        assert lib.px_wake(a.id) == 0       # ready already: nothing
        assert lib.px_wake(b.id) == 1       # b: stray, still waits
        s.release()                         # past a, to b
        assert s.value == 0
        assert a.join() is px.Cancelled
        assert b.join() == "b"
        assert s.value == 0
        assert s.waiters == 0
    run(body)


def test_scopes_closed_every_way_leave_no_hold_on_px_run():
    """The ways a Python scope closes: its with-block ends, returns (with
    another scope inside), raises through it, or its fiber ends in it by an
    exception.  None leaves a hold: a run whose last fiber then parks for good
    raises DeadlockError instead of waiting for ever (px.run on a thread of
    its own, so that a hang fails the test instead of blocking it)."""
    tok = px.CancellationToken()

    def main():
        with px.cancel_scope(tok):
            pass

        def returns_from_two():
            with px.cancel_scope(tok):
                with px.timeout(100):
                    return 7
        assert returns_from_two() == 7
        with pytest.raises(ValueError, match="inner"):
            with px.cancel_scope(tok):
                raise ValueError("inner")

        def ends_in_two():
            with px.cancel_scope(tok):
                with px.timeout(100):
                    raise ValueError("ends")
        f = px.spawn(ends_in_two)
        with pytest.raises(ValueError, match="ends"):
            f.join()
        px.Event().wait()                   # parked for good

    got = []

    def in_thread():
        try:
            px.run(main)
            got.append("returned")
        except BaseException as e:          # noqa: BLE001 -- what the run raised
            got.append(e)
    t = threading.Thread(target=in_thread, daemon=True)
    t.start()
    t.join(TIMEOUT)
    assert not t.is_alive(), "px.run kept alive by a scope that was closed"
    assert len(got) == 1 and isinstance(got[0], px.DeadlockError), got
