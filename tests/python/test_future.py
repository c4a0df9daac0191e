"""px.Future, px.wait_all, px.wait_any: the conformance names of the C
future specs (future.<name>).  Fibers synchronize on observable state (a
waiter that got as far as its wait, a fiber's end), never on sleeps."""
import threading

import pytest

import parataxis as px
from sync_kit import TIMEOUT, run, settle, until

pytestmark = pytest.mark.group("future")   # tests/behaviours.txt: future.<name>


def test_wait_returns_the_value():
    def body():
        fu = px.Future()
        assert not fu.done()
        f = px.spawn(fu.result)
        settle()
        assert not f.done
        value = object()
        fu.set_result(value)
        assert fu.done()
        assert f.join() is value
        assert fu.result() is value and fu.exception() is None   # settled: at once
        assert "done" in repr(fu)
    run(body)
    fu = px.Future()
    fu.set_result(3)
    assert fu.result() == 3                 # a settled future answers off-fiber


def test_an_error_fails_every_wait():
    def body():
        fu = px.Future()
        waiters = [px.spawn(fu.result) for _ in range(3)]
        settle()
        fu.set_exception(ValueError("bad"))
        for w in waiters:
            with pytest.raises(ValueError, match="bad"):
                w.join()
        with pytest.raises(ValueError):
            fu.result()
        assert isinstance(fu.exception(), ValueError)
        other = px.Future()
        other.set_exception(KeyError)       # a class is instantiated
        assert type(other.exception()) is KeyError
        assert "raised ValueError" in repr(fu)
    run(body)


def test_a_second_settlement_is_refused():
    fu = px.Future()
    fu.set_result(1)
    with pytest.raises(px.BusyError):
        fu.set_result(2)
    with pytest.raises(px.BusyError):
        fu.set_exception(ValueError())
    assert fu.result() == 1
    fu = px.Future()
    fu.set_exception(ValueError("first"))
    with pytest.raises(px.BusyError):
        fu.set_result(2)
    with pytest.raises(ValueError, match="first"):
        fu.result()
    # Racing threads: exactly one settles it.
    for _ in range(50):
        fu = px.Future()
        won = []
        start = threading.Barrier(4)

        def settle_it(v, fu=fu, won=won, start=start):
            start.wait()
            try:
                fu.set_result(v)
                won.append(v)
            except px.BusyError:
                pass
        threads = [threading.Thread(target=settle_it, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(TIMEOUT)
        assert len(won) == 1 and fu.result() == won[0]


def test_many_fibers_wait_for_one_future():
    def body():
        fu = px.Future()
        got = []
        fibers = [px.spawn(lambda: got.append(fu.result())) for _ in range(100)]
        settle()
        assert got == []
        fu.set_result("v")
        for f in fibers:
            f.join()
        assert got == ["v"] * 100
    run(body)


def test_settled_from_another_thread():
    def body():
        fu, err = px.Future(), px.Future()
        t = threading.Thread(target=lambda: (fu.set_result(42), err.set_exception(OSError(5, "io"))))
        f = px.spawn(lambda: px.wait_all([fu]))
        settle()
        t.start()
        assert fu.result() == 42
        assert f.join() == [42]
        with pytest.raises(OSError):
            err.result()
        t.join(TIMEOUT)
        # and a fiber of another run settles one this run waits for
        later = px.Future()
        other = threading.Thread(target=px.run, args=(lambda: later.set_result("from a run"),))
        other.start()
        assert later.result() == "from a run"
        other.join(TIMEOUT)
    run(body)


def test_wait_all_returns_values_in_input_order():
    def body():
        fus = [px.Future() for _ in range(5)]
        settle_order = [3, 0, 4, 1, 2]

        def settle_them():
            for i in settle_order:
                fus[i].set_result(i * 10)
                px.yield_()
        px.spawn(settle_them)
        assert px.wait_all(fus) == [0, 10, 20, 30, 40]
        assert px.wait_all([]) == []
        assert px.wait_all(fus[:2] + fus[:1]) == [0, 10, 0]    # settled: at once
        fibers = [px.spawn(lambda i=i: i * 2) for i in range(4)]
        assert px.wait_all(fibers + [fus[4]]) == [0, 2, 4, 6, 40]   # fibers as futures
    run(body)


def test_wait_all_fails_on_the_first_error():
    def body():
        a, b, c = px.Future(), px.Future(), px.Future()

        def fail_them():
            b.set_exception(KeyError("b first"))
            px.yield_()
            a.set_exception(ValueError("a second"))
        px.spawn(fail_them)
        with pytest.raises(KeyError, match="b first"):
            px.wait_all([a, b, c])          # c is never settled: not waited for
        assert not c.done()

        def fails():
            raise OSError("fiber")
        f = px.spawn(fails)
        with pytest.raises(OSError, match="fiber"):
            px.wait_all([c, f])
        assert f.done
    run(body)


def test_wait_any_returns_the_first_settled():
    def body():
        fus = [px.Future() for _ in range(3)]
        px.spawn(fus[2].set_result, "two")
        assert px.wait_any(fus) == 2
        assert fus[2].result() == "two"
        assert px.wait_any(fus) == 2        # settled: at once
        fus = [px.Future() for _ in range(3)]
        px.spawn(fus[1].set_exception, ValueError("one"))
        assert px.wait_any(fus) == 1        # an exception settles it too: not raised
        ev = px.Event()
        fibers = [px.spawn(ev.wait), px.spawn(lambda: "quick")]
        assert px.wait_any(fibers) == 1
        assert fibers[1].join() == "quick"
        ev.set()
        fibers[0].join()
    run(body)


def test_wait_any_settlement_races_a_timeout():
    # 400 rounds: a thread settles the future just as the scope's deadline
    # passes; each round either returns the index (and the value is there) or
    # raises Timeout with the future settled or not -- never both, never a hang,
    # and nothing is left waiting on it.
    def body():
        outcomes = {"settled": 0, "timeout": 0}
        for i in range(400):
            fu = px.Future()
            t = threading.Thread(target=fu.set_result, args=(i,))
            with px.move_on_after(0.0002 * (i % 5)) as scope:
                t.start()
                assert px.wait_any([px.Future(), fu]) == 1
                assert fu.result() == i
                outcomes["settled"] += 1
            if scope.expired:
                outcomes["timeout"] += 1
            t.join(TIMEOUT)
            assert fu.result() == i
        assert sum(outcomes.values()) == 400
    run(body)


def test_a_scope_ends_the_wait():
    def body():
        fu = px.Future()
        with pytest.raises(px.Timeout):
            with px.timeout(0.001):
                fu.result()
        with pytest.raises(px.Timeout):
            with px.timeout(0.001):
                px.wait_all([fu])
        tok = px.CancellationToken()
        px.spawn(tok.cancel)
        with pytest.raises(px.Cancelled):
            with px.cancel_scope(tok):
                px.wait_any([fu])
        assert not fu.done()
        fu.set_result(1)                    # nothing of the waits is left
        assert fu.result() == 1
    run(body)


def test_a_fiber_s_end_settles_its_future():
    def body():
        ev = px.Event()

        def work():
            ev.wait()
            return "result"

        def boom():
            ev.wait()
            raise ValueError("boom")
        f, g = px.spawn(work), px.spawn(boom)
        waiter = px.spawn(px.wait_any, [f, g])
        settle()
        assert not waiter.done
        ev.set()
        assert waiter.join() in (0, 1)
        assert px.wait_all([f]) == ["result"]
        with pytest.raises(ValueError):
            px.wait_all([g])
        assert f.join() == "result"         # join still works
        done = px.spawn(lambda: 7)
        until(lambda: done.done)
        assert px.wait_all([done]) == [7]   # one that ended before it was asked
    run(body)


def test_hostile_arguments():
    def body():
        with pytest.raises(TypeError):
            px.wait_all([px.Future(), 3])
        with pytest.raises(TypeError):
            px.wait_any(["x"])
        with pytest.raises(TypeError):
            px.wait_all(5)
        with pytest.raises(px.InvalidArgument):
            px.wait_any([])
        fu = px.Future()
        with pytest.raises(TypeError):
            fu.set_exception("not an exception")
        with pytest.raises(TypeError):
            fu.set_exception(int)
        assert not fu.done()
        fu.set_result(None)
        assert fu.result() is None
        me = []

        def waits_for_itself():
            with pytest.raises(px.DeadlockError):
                px.wait_all([me[0]])
            with pytest.raises(px.DeadlockError):
                px.wait_any([fu, me[0]])
        me.append(px.spawn(waits_for_itself))
        me[0].join()
    run(body)
    with pytest.raises(px.NoFiberError):
        px.Future().result()                # unsettled, off-fiber
    with pytest.raises(px.NoFiberError):
        px.wait_any([px.Future()])
    box = []
    run(lambda: box.append(px.spawn(lambda: 1)))
    with pytest.raises(px.BusyError):       # a fiber of another (ended) run
        run(lambda: px.wait_all(box))
