"""parataxis._host, the greenlet host: what its C side must do even when a run
ends abnormally or is handed bad input."""
import pytest

import parataxis as px
from parataxis import _fibers, _host


def test_post_after_a_run_that_raised_is_refused(monkeypatch):
    # A run that ends by an exception out of the host's loop (not through its
    # normal end) frees its scheduler: a Scheduler kept past it must refuse
    # posts as after a normal end (Closed, the call never runs), never hand
    # them to the freed scheduler (where the call would stay).
    real_loop = _host.loop

    def loop_then_fail():
        real_loop()
        raise RuntimeError("the host's loop failed")

    kept = []

    def main():
        kept.append(px.scheduler())

    monkeypatch.setattr(_fibers._host, "loop", loop_then_fail)
    with pytest.raises(RuntimeError, match="loop failed"):
        px.run(main)
    monkeypatch.undo()
    ran = []
    with pytest.raises(px.Closed):
        kept[0].post(ran.append, "never")
    assert ran == [] and _fibers._POSTED == {}


def test_spawn_of_something_that_is_no_fiber_fails_the_run_not_the_process():
    # _host.spawn takes a Fiber (its worker calls job._main()); anything else
    # makes that call fail, which ends the run with the error, not a crash.
    def main():
        _host.spawn(42)
        px.yield_()

    with pytest.raises(AttributeError):
        px.run(main)


def test_park_of_a_yield_off_fiber_is_no_fiber_error():
    with pytest.raises(px.NoFiberError):
        _host.park(px._parataxis.lib.PX_EYIELD)


def test_wait_checks_its_op_against_the_handle_it_is_given():
    # A wait is named by op, and the op by the kind of handle it takes: a wrong
    # pairing, or no handle at all, raises instead of calling C with it.
    def main():
        m, ch, f = px.Mutex(), px.Channel(), px.spawn(lambda: None)
        with pytest.raises(TypeError):
            _host.wait(_host.CHAN_RECV, m._h)
        with pytest.raises(TypeError):
            _host.wait(_host.MUTEX_LOCK, 42)
        with pytest.raises(ValueError):
            _host.wait(_host.JOIN + 1000, m._h)
        with pytest.raises(TypeError):
            _host.wait(_host.JOIN, ch._h)
        f.join()
        assert not m.try_lock() or m.owner == px.current_id()

    px.run(main)


def test_a_released_spawn_handle_is_spent():
    # release() once is px_fiber_release; the handle is then spent: a second
    # release does nothing, a join through it raises (never a freed fiber).
    def main():
        f = px.spawn(lambda: 7)
        assert f.join() == 7
        h = f._f
        _host.release(h)
        _host.release(h)
        with pytest.raises(ValueError):
            _host.wait(_host.JOIN, h)

    px.run(main)
