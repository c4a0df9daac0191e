"""The contracts of Python fibers that issue 18 found broken: each fiber's own
contextvars context, misnested scopes, waits in a raw greenlet, fork children,
Fiber() misuse, one duration rule, and handler calls owed by a given-up run.

Waits across fibers synchronize on events; timing checks only say "well before
a bound that would mean the wait was not interrupted"."""
import contextvars
import decimal
import math
import os
import subprocess
import sys
import textwrap
import time

import greenlet
import pytest

import parataxis as px
from parataxis import _fibers
from conftest import TIMEOUT

var = contextvars.ContextVar("var", default="unset")


def run_script(src):
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(src)],
                       capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout.split("\n"), r.stderr


# -- 7: each fiber runs in its own context, a copy of its spawner's ----------

def test_a_value_set_in_one_fiber_does_not_leak_into_the_next():
    def main():
        px.spawn(var.set, "leaked").join()
        return px.spawn(var.get).join(), var.get()
    assert px.run(main) == ("unset", "unset")


def test_a_fiber_sees_its_spawners_values_at_spawn():
    def child(seen):
        seen.append(var.get())
        var.set("child")                # its own copy: the spawner's stays
        px.yield_()
        seen.append(var.get())

    def main():
        seen = []
        var.set("main")
        f = px.spawn(child, seen)
        var.set("main, later")          # after the spawn: not in the child's copy
        f.join()
        return seen, var.get()
    assert px.run(main) == (["main", "child"], "main, later")
    assert var.get() == "unset"         # nor in the caller of run


def test_decimal_contexts_are_per_fiber():
    """A localcontext held across a yield applies to its own fiber only, and
    a context set in one fiber is not the next one's."""
    def precise(out):
        with decimal.localcontext() as c:
            c.prec = 5
            px.yield_()
            out.append(str(decimal.Decimal(1) / 7))

    def plain(out):
        out.append(str(decimal.Decimal(1) / 7))

    def main():
        out = []
        a, b = px.spawn(precise, out), px.spawn(plain, out)
        a.join(), b.join()
        px.spawn(decimal.setcontext, decimal.Context(prec=3)).join()
        out.append(px.spawn(lambda: decimal.getcontext().prec).join())
        return out
    default = str(decimal.Context().divide(decimal.Decimal(1), decimal.Decimal(7)))
    assert px.run(main) == [default, "0.14286", decimal.Context().prec]


def test_a_reused_worker_greenlet_carries_no_context():
    """Fibers run one after another on the same pooled greenlet."""
    def main():
        seen = []
        for i in range(50):
            px.spawn(lambda i=i: (seen.append(var.get()), var.set(i))).join()
        return seen
    assert px.run(main) == ["unset"] * 50


def test_handler_and_post_fibers_run_in_copies_of_their_adders_context():
    """A timer handler runs in a copy of the context of its add (as asyncio's
    call_later), a post in one of the poster's, each fiber in its own: what
    they set stays theirs."""
    def main():
        seen = []
        ev = px.Event()
        q = px.TimerQueue(executor=px.scheduler())
        var.set("at add")
        q.add(0, lambda aborted: (seen.append(var.get()), var.set("h"), ev.set()))
        var.set("at post")
        px.scheduler().post(lambda: (seen.append(var.get()), var.set("p")))
        var.set("main")
        ev.wait()
        px.yield_()
        q.close()
        return sorted(seen), var.get()
    token = var.set("caller")
    try:
        assert px.run(main) == (["at add", "at post"], "main")
        assert var.get() == "caller"
    finally:
        var.reset(token)


# -- 8: a misnested scope is a clear error and changes no other scope --------

def _gen_holding(scope):
    with scope:
        yield 1
    yield 2


def test_a_scope_exited_in_another_fiber_is_refused():
    """A generator holding a timeout, resumed in another fiber inside that
    fiber's own timeout: RuntimeError at once, and both deadlines stay."""
    def main():
        g = _gen_holding(px.timeout(TIMEOUT))
        ev = px.Event()
        holder_fired = []

        def holder():
            next(g)                     # its timeout is open in this fiber
            ev.wait()
            holder_fired.append("held")

        f = px.spawn(holder)
        px.yield_()
        t0 = time.monotonic()
        with pytest.raises(RuntimeError, match="another fiber"):
            next(g)
        with pytest.raises(px.Timeout):
            with px.timeout(0.02) as mine:
                px.sleep(TIMEOUT)       # mine still fires
        assert mine.fired
        assert time.monotonic() - t0 < TIMEOUT / 2
        ev.set()
        f.join()
        return holder_fired
    assert px.run(main) == ["held"]


def test_scopes_exited_out_of_order_are_refused_and_keep_their_flags():
    def main():
        a, b = px.timeout(0.01), px.timeout(TIMEOUT)
        a.__enter__()
        b.__enter__()
        with pytest.raises(px.Timeout):
            px.sleep(TIMEOUT)
        with pytest.raises(RuntimeError, match="out of order"):
            a.__exit__(None, None, None)
        b.__exit__(None, None, None)    # in order now
        a.__exit__(None, None, None)
        return a.fired, b.fired
    assert px.run(main) == (True, False)


def test_a_scope_exited_off_fiber_is_refused():
    def main():
        g = _gen_holding(px.move_on_after(TIMEOUT))
        next(g)
        return g
    g = px.run(main)
    with pytest.raises(RuntimeError, match="another fiber"):
        next(g)


# -- 9: a wait inside a raw greenlet made in a fiber -------------------------

def test_a_wait_in_a_raw_greenlet_resumes_that_greenlet():
    def main():
        trail = []

        def g():
            px.sleep(0.05)
            trail.append("slept")
            return "g done"

        def other():
            trail.append("other ran")

        px.spawn(other)
        r = greenlet.greenlet(g).switch()
        trail.append(r)
        return trail
    assert px.run(main) == ["other ran", "slept", "g done"]


def test_waits_in_nested_raw_greenlets_and_sync_objects():
    def main():
        m, out = px.Mutex(), []

        def inner():
            with m:
                px.yield_()
                out.append("inner")
            return "inner done"

        def outer():
            r = greenlet.greenlet(inner).switch()
            px.sleep(0.01)
            return r

        def contender():
            with m:
                out.append("contender")

        px.spawn(contender)
        out.append(greenlet.greenlet(outer).switch())
        return out
    assert px.run(main) == ["inner", "contender", "inner done"]


@pytest.mark.parametrize("wait", [False, True])
def test_a_greenlet_made_outside_the_run_returns_to_the_fiber_that_switched(wait):
    """Its parent is the greenlet that called run (the root): its result goes
    to the fiber whose turn it is, which goes on -- no turn ends unparked."""
    def g():
        if wait:
            px.sleep(0.01)
        return "g done"
    outside = greenlet.greenlet(g)

    def main():
        trail = []
        other = px.spawn(trail.append, "other")
        trail.append(outside.switch())
        px.yield_()
        other.join()
        return trail
    assert px.run(main) == (["other", "g done"] if wait else ["g done", "other"])


REFUSED = "a parked fiber's greenlet was switched into from another fiber"


def test_a_switch_into_a_raw_greenlet_parked_by_another_fiber_is_refused():
    """Fiber a parks in a raw greenlet g; main switching into g gets a
    RuntimeError, and g's wait goes on undisturbed until its event is set
    (before the fix the switch resumed g's wait early, and the run failed
    with BusyError)."""
    def main():
        trail, box, ev = [], {}, px.Event()

        def g():
            trail.append("g waits")
            ev.wait()
            trail.append("g woke")
            return "g done"

        def a():
            box["g"] = greenlet.greenlet(g)
            return box["g"].switch()

        fa = px.spawn(a)
        while "g" not in box:
            px.yield_()
        px.yield_()                      # a is parked in g's wait now
        with pytest.raises(RuntimeError, match=REFUSED):
            box["g"].switch("from main")
        trail.append("refused")
        ev.set()
        trail.append(fa.join())
        return trail
    assert px.run(main) == ["g waits", "refused", "g woke", "g done"]


def test_a_switch_into_another_fibers_parked_worker_greenlet_is_refused():
    """The greenlet of a fiber itself (greenlet.getcurrent() in it), parked
    in a wait: the switch is refused the same way."""
    def main():
        trail, box, ev = [], {}, px.Event()

        def a():
            box["w"] = greenlet.getcurrent()
            trail.append("a waits")
            ev.wait()
            trail.append("a woke")
            return "a done"

        fa = px.spawn(a)
        while "w" not in box:
            px.yield_()
        with pytest.raises(RuntimeError, match=REFUSED):
            box["w"].switch()
        trail.append("refused")
        ev.set()
        trail.append(fa.join())
        return trail
    assert px.run(main) == ["a waits", "refused", "a woke", "a done"]


def test_a_switch_into_an_idle_worker_greenlet_is_refused():
    """A fiber's greenlet outlives it: once its job ended it waits in the pool
    for the next fiber.  A switch into it from a fiber is refused, and the
    fibers spawned after run as usual."""
    def main():
        box = {}
        px.spawn(lambda: box.setdefault("w", greenlet.getcurrent())).join()
        with pytest.raises(RuntimeError, match=REFUSED):
            box["w"].switch()
        return [px.spawn(lambda k=k: k * k).join() for k in range(3)]
    assert px.run(main) == [0, 1, 4]


def test_a_throw_into_an_idle_worker_greenlet_is_refused():
    """greenlet.throw into an ended fiber's greenlet, idle in the pool, is
    refused as a switch is: the thrower gets RuntimeError, the exception is
    dropped, and the fibers spawned after run as usual (before: the run
    failed with the thrown exception)."""
    def main():
        box = {}
        px.spawn(lambda: box.setdefault("w", greenlet.getcurrent())).join()
        with pytest.raises(RuntimeError, match=REFUSED):
            box["w"].throw(ValueError("boom"))
        return [px.spawn(lambda k=k: k * k).join() for k in range(3)]
    assert px.run(main) == [0, 1, 4]


def test_the_refusal_reaches_the_raw_greenlet_a_fiber_runs_in():
    """Fiber b resumed in the raw greenlet it parked in switches from there
    into fiber a's parked greenlet: the error is raised in b's raw greenlet,
    where the switch was made, not in b's own."""
    def main():
        box, ev = {}, px.Event()

        def a():
            box["a"] = greenlet.getcurrent()
            ev.wait()
            return "a done"

        def inner():
            px.yield_()                  # b parks here, resumes here
            try:
                box["a"].switch()
            except RuntimeError as e:
                return "inner: " + str(e)
            return "inner: switched"

        def b():
            return greenlet.greenlet(inner).switch()

        fa = px.spawn(a)
        while "a" not in box:
            px.yield_()
        r = px.spawn(b).join()
        ev.set()
        return r, fa.join()
    assert px.run(main) == ("inner: " + REFUSED, "a done")


def test_a_switch_from_a_raw_greenlet_entered_without_a_wait_is_refused_too():
    """Fiber b switches into a raw greenlet h (no wait) and h into fiber a's
    parked greenlet: h is not known to the run, so the error is raised where b
    entered h; a's wait is undisturbed and the run stays in step."""
    def main():
        box, ev = {}, px.Event()

        def a():
            box["a"] = greenlet.getcurrent()
            ev.wait()
            return "a done"

        def b():
            h = greenlet.greenlet(lambda: box["a"].switch())
            with pytest.raises(RuntimeError, match=REFUSED):
                h.switch()
            return "b refused"

        fa = px.spawn(a)
        while "a" not in box:
            px.yield_()
        r = px.spawn(b).join()
        ev.set()
        return r, fa.join()
    assert px.run(main) == ("b refused", "a done")


# -- 10: a fiber that returns in a fork child ---------------------------------

@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.parametrize("child", ["return 'child'", "raise KeyError('child')",
                                   "px.run(lambda: px.spawn(lambda: 5).join())"])
def test_a_fiber_ending_in_a_fork_child_makes_run_raise_forked_error(child):
    """The forking fiber returns or raises in the child -- after a run of its
    own there too (NoFiberError before the fix: that run's end forgot the
    forked one): the px.run it ran under raises ForkedError, nothing else of
    the parent's run runs there."""
    rc, out, err = run_script(f"""
        import os, parataxis as px
        def forker():
            pid = os.fork()
            if pid == 0:
                {child}
                return "child"
            _, status = os.waitpid(pid, 0)
            return os.waitstatus_to_exitcode(status)
        def main():
            other = px.spawn(lambda: print("other", flush=True))
            r = px.spawn(forker).join()
            other.join()
            return r
        try:
            r = px.run(main)
        except px.Error as e:
            r = type(e).__name__
        print("ran", r, flush=True)
    """)
    assert rc == 0, err
    lines = [line for line in out if line]
    assert sorted(lines) == ["other", "ran 0", "ran ForkedError"], (out, err)


# -- 11: Fiber() misuse -------------------------------------------------------

def test_constructors_with_bad_arguments_raise_a_plain_type_error():
    """Fiber() printed 'Exception ignored in: Fiber.__del__' (its __init__
    never ran); the other constructors are checked alike."""
    rc, out, err = run_script("""
        import gc, parataxis as px
        for make in (lambda: px.Fiber(), lambda: px.Fiber(1),
                     lambda: px.TimerQueue(executor=42), lambda: px.TimerQueue(1, 2, 3),
                     lambda: px.HandlerQueue(1, 2, 3), lambda: px.Timer(),
                     lambda: px.Timer(42), lambda: px.CancellationToken(1),
                     lambda: px.Mutex(1), lambda: px.Channel("x"), lambda: px.Barrier(),
                     lambda: px.Scheduler(), lambda: px.timeout(),
                     lambda: px.cancel_scope(1)):
            try:
                make()
            except TypeError:
                print("TypeError")
            gc.collect()
    """)
    assert rc == 0 and out[:-1] == ["TypeError"] * 14, (out, err)
    assert err == "", err


# -- 12: one duration rule ----------------------------------------------------

NEVER = [math.inf, 10**400, 2**63, 1e300, 9.3e9]


@pytest.mark.group("fiber")
@pytest.mark.parametrize("seconds", NEVER)
def test_durations_of_2_63_ns_or_more_mean_never(seconds):
    def main():
        tok = px.CancellationToken()
        px.spawn(tok.cancel)
        with pytest.raises(px.Cancelled):
            with px.cancel_scope(tok):
                px.sleep(seconds)
        with px.move_on_after(seconds) as s:
            px.sleep(0)
        with px.timeout(seconds) as t:
            px.yield_()
        return s.expired, t.fired
    assert px.run(main) == (False, False)


@pytest.mark.parametrize("seconds", [-1, -1e-9, -math.inf, math.nan, -10**400])
def test_a_negative_or_nan_duration_is_invalid_everywhere(seconds):
    def main():
        for call in (px.sleep, px.timeout, px.move_on_after):
            with pytest.raises(px.InvalidArgument):
                call(seconds)
    px.run(main)
    with px.TimerQueue() as q:
        with pytest.raises(px.InvalidArgument):
            q.add(seconds, print)
        with pytest.raises(px.InvalidArgument):
            q.add_periodic(seconds, 1, print)
        with pytest.raises(px.InvalidArgument):
            q.add_periodic(0, seconds, print)
    with pytest.raises(px.InvalidArgument):
        px.HandlerQueue().wait(seconds)


@pytest.mark.parametrize("seconds", NEVER)
def test_timer_queue_durations_too_long_mean_never(seconds, rec):
    with px.TimerQueue() as q:
        h = q.add(seconds, rec)
        p = q.add_periodic(seconds, seconds, rec)
        assert q.cancel(h) and q.cancel(p)
    assert rec.wait_for(2) == [True, True]
    hq = px.HandlerQueue()
    hq.close()
    with pytest.raises(px.Closed):
        hq.wait(seconds)


def test_one_duration_rule():
    ns = __import__("parataxis._core", fromlist=["_ns"])._ns
    assert ns(1.5) == 1_500_000_000
    assert ns(0) == 0
    assert ns(math.inf) == ns(10**400) == ns(2**63) == 2**63 - 1
    with pytest.raises(TypeError):
        ns("1")
    with pytest.raises(TypeError):
        ns(True)


# -- a given-up run owes its handler calls ------------------------------------

def test_a_given_up_run_calls_every_handler_it_took_in(monkeypatch, rec):
    """The fiber of a handler call cannot be made (its factory raises): the run
    is given up with that exception, and every handler call it owed is made
    once, aborted: those taken in as fibers never started, and those posted
    to it and not taken in yet (two more timers, fired while the factory
    runs)."""
    real = _fibers._factory
    queue = []

    def failing(key, call):
        monkeypatch.setattr(_fibers, "_factory", real)
        q = queue[0]
        q.add(0, rec)
        q.add(0, rec)
        end = time.monotonic() + TIMEOUT
        while q.pending and time.monotonic() < end:   # posted to the run
            time.sleep(0.001)
        raise RuntimeError("no fiber for this call")

    def main():
        q = px.TimerQueue(executor=px.scheduler())
        queue.append(q)
        for _ in range(3):
            q.add(0, rec)
        time.sleep(0.2)                 # the worker posts all three meanwhile
        px.sleep(TIMEOUT)

    monkeypatch.setattr(_fibers, "_factory", failing)   # run() hands it over
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="no fiber for this call"):
        px.run(main)
    assert time.monotonic() - t0 < TIMEOUT / 2
    assert rec.wait_for(5) == [True] * 5
    queue[0].close()
    assert len(rec.calls) == 5
