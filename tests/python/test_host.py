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


def test_the_cffi_module_is_the_c_api_and_nothing_is_added_to_it():
    # Two modules, each for one reason: cffi's holds ffi and lib only (no type
    # added at import), what holds the GIL is _host's, and no function of
    # either takes or gives a C address as an int.
    from parataxis import _parataxis
    assert {n for n in vars(_parataxis) if not n.startswith("__")} == {"ffi", "lib"}
    for name in ("TimerHandle", "_TimerQueueBase", "Gate", "Batch", "Call", "Executor"):
        assert isinstance(getattr(_host, name), type), name
    assert px.TimerHandle is _host.TimerHandle
    assert not hasattr(_host, "handler_kind")
    assert not [n for n in dir(_parataxis.lib) if n.startswith("pxpy_") and
                n in ("pxpy_export", "pxpy_handler", "pxpy_post", "pxpy_invoke")]


def test_handles_of_the_timer_side_refuse_what_is_not_theirs():
    from parataxis._parataxis import ffi, lib
    with pytest.raises(TypeError):
        _host.Call()                    # made by C only: no address from Python
    with pytest.raises(TypeError):
        _host.Executor()
    with pytest.raises(TypeError):
        _host.timer_wait(object(), None, None, print)
    with pytest.raises(TypeError):
        _host.Batch(42)                 # None or a callable
    # A gate is shut until pxpy_gate_init opens it: a call refuses, touches nothing.
    assert lib.pxpy_enter(ffi.from_buffer("pxpy_gate *", _host.Gate())) == lib.PX_ECLOSED
    q = px.TimerQueue()
    q._gate = None
    with pytest.raises(RuntimeError):
        q.add(1, print)                 # no gate: refused, nothing added
    q._gate = object()
    with pytest.raises(TypeError):
        q.add(1, print)


def test_a_library_call_handed_to_an_executor_is_made_once():
    # A concurrent.futures executor gets each call as a _host.Call: it makes
    # the library's call once; a second making raises instead of calling C
    # with a record that may be gone.
    import concurrent.futures

    import threading
    got, ran, done = [], [], threading.Event()

    class Keep(concurrent.futures.Executor):
        def submit(self, fn, *args, **kwargs):
            got.append(fn)
            done.set()
            return concurrent.futures.Future()

    q = px.TimerQueue(Keep())
    q.add(0, ran.append)
    assert done.wait(5)
    call = got[0].call
    call(0)
    with pytest.raises(RuntimeError, match="made already"):
        call(0)
    q.close()
    assert ran == [False]
