"""px.group: the conformance names of the C group specs (group.<name>), and
what only the Python form has (the with block, ExceptionGroup,
KeyboardInterrupt).  Fibers synchronize on observable state (members that got
as far as their wait, a count of live members), never on sleeps."""
import os
import sys
import threading

import pytest

import parataxis as px
from sync_kit import TIMEOUT, run, settle, until

if sys.version_info >= (3, 11):
    from builtins import BaseExceptionGroup, ExceptionGroup
else:
    from exceptiongroup import BaseExceptionGroup, ExceptionGroup

pytestmark = pytest.mark.group("group")   # tests/behaviours.txt: group.<name>


def test_waits_for_every_member():
    def body():
        ended = []
        ev = px.Event()

        def member(i):
            if i % 2:
                ev.wait()
            else:
                px.yield_()
            ended.append(i)
            return i
        with px.group() as g:
            fibers = [g.spawn(member, i) for i in range(10)]
            until(lambda: len(ended) == 5)
            assert g.live == 5
            ev.set()
        assert sorted(ended) == list(range(10))
        assert g.live == 0 and not g.cancelled
        assert [f.join() for f in fibers] == list(range(10))   # joinable, done
        with px.group():                    # an empty group: leaves at once
            pass
    run(body)


def test_first_failure_cancels_members_in_every_kind_of_wait():
    # Members parked in a sleep, a Mutex lock, a Channel recv, an Event wait,
    # a Semaphore acquire, an fd read and a Future wait: the first failure
    # cancels each, and the body's own wait too; only the failure is reported.
    r, w = os.pipe()
    os.set_blocking(r, False)

    def body():
        m, ch, ev, sem, fu = px.Mutex(), px.Channel(), px.Event(), px.Semaphore(0), px.Future()
        m.lock()
        parked = []
        waits = {
            "sleep": lambda: px.sleep(3600),
            "mutex": m.lock,
            "recv": ch.recv,
            "event": ev.wait,
            "sem": sem.acquire,
            "fd": lambda: px.wait_readable(r),
            "future": fu.result,
        }
        cancelled = []

        def member(name):
            parked.append(name)
            try:
                waits[name]()
            except px.Cancelled:
                cancelled.append(name)
                raise

        def fail():
            raise ValueError("first")
        with pytest.raises(ExceptionGroup) as e:
            with px.group() as g:
                for name in waits:
                    g.spawn(member, name)
                until(lambda: len(parked) == len(waits))
                settle()
                g.spawn(fail)
                px.sleep(3600)               # the body is cancelled too
        assert [type(x) for x in e.value.exceptions] == [ValueError]
        assert sorted(cancelled) == sorted(waits)
        assert m.waiters == 0 and ch.waiters == 0 and ev.waiters == 0 and sem.waiters == 0
        m.unlock()
    try:
        run(body)
    finally:
        os.close(r)
        os.close(w)


def test_failures_are_collected_in_order():
    def body():
        step = px.Event()

        def first():
            raise KeyError("first")

        def second():
            try:
                step.wait()
            except px.Cancelled:
                raise OSError("second, while cancelled")

        def third():
            try:
                step.wait()
            except px.Cancelled:
                settle()                    # after second's
                raise RuntimeError("third")
        with pytest.raises(ExceptionGroup) as e:
            with px.group() as g:
                g.spawn(second)
                g.spawn(third)
                settle()
                g.spawn(first)
        assert [type(x) for x in e.value.exceptions] == [KeyError, OSError, RuntimeError]
        assert str(e.value.exceptions[0]) == "'first'"
    run(body)


def test_a_member_cancelled_by_the_group_has_not_failed():
    def body():
        ev = px.Event()
        with px.group() as g:
            g.spawn(ev.wait)
            g.spawn(ev.wait)
            settle()
            assert g.cancel() is True
            assert g.cancel() is False      # already
        assert g.cancelled                  # left cleanly: no failure
        # a member's own scope's Cancelled (the group not cancelled) is one
        tok = px.CancellationToken()

        def own_scope():
            with px.cancel_scope(tok):
                ev2.wait()
        ev2 = px.Event()
        with pytest.raises(ExceptionGroup) as e:
            with px.group() as g2:
                g2.spawn(own_scope)
                settle()
                tok.cancel()
        assert [type(x) for x in e.value.exceptions] == [px.Cancelled]
    run(body)


def test_cancelled_from_another_thread():
    def body():
        ev = px.Event()
        results = []

        def member():
            try:
                ev.wait()
            except px.Cancelled:
                results.append("cancelled")
                raise
        with px.group() as g:
            for _ in range(3):
                g.spawn(member)
            settle()
            t = threading.Thread(target=g.cancel)
            t.start()
            ev2 = px.Event()
            with pytest.raises(px.Cancelled):
                ev2.wait()                  # the body's wait: cancelled as well
            t.join(TIMEOUT)
        assert results == ["cancelled"] * 3 and g.cancelled
    run(body)


def test_cancellation_races_normal_completion():
    # 400 rounds: members end on their own just as another thread cancels the
    # group.  Each member either returns or raises Cancelled; the group never
    # reports a failure, never hangs, and no member outlives it.
    def body():
        for i in range(400):
            ends = []

            def member(ends=ends):
                px.yield_()
                ends.append(1)
            with px.group() as g:
                for _ in range(3):
                    g.spawn(member)
                t = threading.Thread(target=g.cancel)
                t.start()
                if i % 2:
                    px.yield_()
            t.join(TIMEOUT)
            assert g.live == 0 and len(ends) <= 3
    run(body)


def test_a_scope_of_the_waiter_cancels_the_group_and_waits_for_it():
    def body():
        unwound = []

        def member():
            try:
                px.sleep(3600)
            finally:
                settle()                    # a member cleaning up: still waited for
                unwound.append(1)
        with px.move_on_after(0.01) as scope:
            with px.group() as g:
                g.spawn(member)
                g.spawn(member)
        assert scope.expired and unwound == [1, 1] and g.live == 0 and g.cancelled
        tok = px.CancellationToken()
        px.spawn(tok.cancel)
        with pytest.raises(px.Cancelled):
            with px.cancel_scope(tok):
                with px.group() as g:
                    g.spawn(member)
        assert unwound == [1, 1, 1]
    run(body)


def test_spawn_into_a_cancelled_group_is_refused():
    def body():
        ran = []
        with px.group() as g:
            g.cancel()
            with pytest.raises(px.Cancelled):
                g.spawn(ran.append, 1)
        assert ran == [] and g.live == 0
        member_saw = []

        def late():
            try:
                px.Event().wait()
            except px.Cancelled:
                try:
                    g2.spawn(ran.append, 2)
                except px.Cancelled:
                    member_saw.append("refused")
                    raise                   # not a failure: the group is cancelled
        with px.group() as g2:               # a member refused the same way
            g2.spawn(late)
            settle()
            g2.cancel()
        assert ran == [] and member_saw == ["refused"]
        with px.group() as g3:               # the body's refusal ends the block quietly
            g3.cancel()
            g3.spawn(ran.append, 3)
            ran.append("not reached")
        assert ran == []
    run(body)


def test_spawn_after_the_wait_is_refused():
    def body():
        with px.group() as g:
            pass
        with pytest.raises(px.Closed):
            g.spawn(print)
        with pytest.raises(RuntimeError):
            with g:                          # a group is entered once
                pass
    run(body)


def test_a_member_spawns_into_its_own_group():
    def body():
        got = []

        def member(depth):
            got.append(depth)
            if depth < 3:
                g.spawn(member, depth + 1)
                g.spawn(member, depth + 1)
        with px.group() as g:
            g.spawn(member, 0)
        assert sorted(got) == [0, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3]

        def while_closing():
            settle()
            g2.spawn(got.append, "while the block's exit waits")
        got.clear()
        with px.group() as g2:
            g2.spawn(while_closing)
        assert got == ["while the block's exit waits"]
    run(body)


def test_groups_nest():
    def body():
        inner_cancelled = []

        def inner_member():
            try:
                px.sleep(3600)
            except px.Cancelled:
                inner_cancelled.append(1)
                raise

        def outer_member():
            with px.group() as inner:
                inner.spawn(inner_member)
                inner.spawn(inner_member)

        def fail():
            settle()
            raise ValueError("outer failure")
        with pytest.raises(ExceptionGroup) as e:
            with px.group() as outer:
                outer.spawn(outer_member)
                outer.spawn(fail)
        assert [type(x) for x in e.value.exceptions] == [ValueError]
        assert inner_cancelled == [1, 1]

        def inner_fails():
            with px.group() as inner:
                inner.spawn(lambda: 1 / 0)
        with pytest.raises(ExceptionGroup) as e:     # a nested group's group
            with px.group() as outer:
                outer.spawn(inner_fails)
        inner_group = e.value.exceptions[0]
        assert isinstance(inner_group, ExceptionGroup)
        assert isinstance(inner_group.exceptions[0], ZeroDivisionError)
    run(body)


def test_hostile_arguments():
    def body():
        with px.group() as g:
            with pytest.raises(TypeError):
                g.spawn(3)
            with pytest.raises(TypeError):
                g.spawn()
        g0 = px.group()
        with pytest.raises(RuntimeError):
            g0.spawn(print)                  # before its with block
        with pytest.raises(RuntimeError):
            g0.cancel()
        assert "new" in repr(g0)

        def other_fiber_exits():
            g1.__exit__(None, None, None)
        g1 = px.group().__enter__()
        f = px.spawn(other_fiber_exits)
        with pytest.raises(RuntimeError):
            f.join()
        g1.__exit__(None, None, None)
    run(body)
    with pytest.raises(px.NoFiberError):
        with px.group():
            pass
    box = []

    def keep():
        box.append(px.group().__enter__())
        box[0].__exit__(None, None, None)
    run(keep)
    with pytest.raises(px.Closed):
        run(lambda: box[0].spawn(print))
    assert box[0].cancel() is True          # a group that outlived its run
    t = threading.Thread(target=box[0].cancel)
    t.start()
    t.join(TIMEOUT)
    assert box[0].cancelled and box[0].live == 0


def test_an_exception_in_the_with_body_cancels_the_members():
    def body():
        cancelled = []

        def member():
            try:
                px.sleep(3600)
            except px.Cancelled:
                cancelled.append(1)
                raise
        with pytest.raises(ExceptionGroup) as e:
            with px.group() as g:
                g.spawn(member)
                settle()
                raise LookupError("body")
        assert [type(x) for x in e.value.exceptions] == [LookupError]
        assert cancelled == [1] and g.live == 0
    run(body)


def test_keyboardinterrupt_and_systemexit_pass_through_bare():
    def body():
        def interrupted():
            raise KeyboardInterrupt

        def sleeper():
            px.sleep(3600)
        with pytest.raises(KeyboardInterrupt):
            with px.group() as g:
                g.spawn(sleeper)
                g.spawn(interrupted)
        with pytest.raises(SystemExit):
            with px.group() as g:
                g.spawn(sleeper)
                settle()
                sys.exit(3)
        assert g.live == 0
        with pytest.raises(BaseExceptionGroup):      # a BaseException that is neither
            with px.group() as g:
                g.spawn(lambda: (_ for _ in ()).throw(GeneratorExit))
    run(body)
