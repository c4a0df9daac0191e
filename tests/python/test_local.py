"""Fiber-local values are contextvars: each fiber runs in its own copy of its
spawner's context, taken at spawn, as an asyncio task does (C's px_local_*
with an inherit that copies)."""
import contextvars

import parataxis as px

request = contextvars.ContextVar("request", default=None)


def test_a_spawned_fiber_inherits_when_asked():
    """A value set before spawn is the child's: its context is a copy of
    the spawner's at spawn (a later change by the spawner is not seen)."""
    def child():
        return request.get()

    def main():
        request.set("GET /")
        f = px.spawn(child)
        with px.group() as g:
            member = g.spawn(child)
        request.set("changed after the spawn")
        return f.join(), member.join(), px.spawn(child).join()
    assert px.run(main) == ("GET /", "GET /", "changed after the spawn")
    assert request.get() is None                    # nor does it reach the caller's


def test_a_value_is_per_fiber():
    """Fibers that set the same variable each keep their own value across
    their waits, whatever the others set meanwhile."""
    def worker(i, barrier):
        request.set(i)
        barrier.arrive_and_wait()       # every one has set its own
        px.sleep(0.001 * (5 - i))
        px.yield_()
        return request.get()

    def main():
        barrier = px.Barrier(5)
        fibers = [px.spawn(worker, i, barrier) for i in range(5)]
        results = [f.join() for f in fibers]
        return results, request.get()
    assert px.run(main) == ([0, 1, 2, 3, 4], None)


def test_changes_in_a_child_do_not_reach_its_parent():
    def child(ready):
        assert request.get() == "parent's"
        request.set("child's")
        ready.set()
        return request.get()

    def main():
        request.set("parent's")
        ready = px.Event()
        f = px.spawn(child, ready)
        ready.wait()                    # the child has set its value
        assert request.get() == "parent's"
        assert f.join() == "child's"
        return request.get()
    assert px.run(main) == "parent's"
