"""px.select: the conformance names of tests/c/sync/select.c (select.<name>).

Fibers synchronize on observable state (a fiber that got as far as its wait,
a count of waiters), never on sleeps.  "Nothing queued" is read from the
objects: Channel.waiters, Event.waiters, Semaphore.waiters, a try_recv that
finds no value a losing send would have left.
"""
import os

import pytest

import parataxis as px
from sync_kit import run, until

pytestmark = pytest.mark.group("select")   # tests/behaviours.txt: select.<name>


def test_a_ready_case_fires_without_waiting():
    def body():
        a, b = px.Channel(1), px.Channel(1)
        b.send(7)
        assert px.select(a.recv_case(), b.recv_case()) == (1, 7)
        assert len(b) == 0 and a.waiters == 0 and b.waiters == 0
        many = [px.Channel(1) for _ in range(100)]        # more cases than fit inline
        many[77].send("x")
        assert px.select(*[ch.recv_case() for ch in many]) == (77, "x")
    run(body)


def test_waits_for_the_first_ready_case():
    def body():
        a, b = px.Channel(), px.Channel()
        f = px.spawn(b.send, 42)            # runs once the select parks
        assert px.select(a.recv_case(), b.recv_case()) == (1, 42)
        f.join()
        assert a.waiters == 0 and b.waiters == 0     # the losing case left a
        many = [px.Channel() for _ in range(100)]
        f = px.spawn(many[42].send, "y")
        assert px.select(*[ch.recv_case() for ch in many]) == (42, "y")
        f.join()
        assert sum(ch.waiters for ch in many) == 0
    run(body)


def test_ready_cases_fire_uniformly():
    # Four buffered channels, each always holding a value: every select finds
    # four ready cases; over 10,000 rounds each fires a quarter of the time,
    # within 10 %.
    rounds = 10000

    def body():
        chans = [px.Channel(1) for _ in range(4)]
        for i, ch in enumerate(chans):
            ch.send(i)
        cases = [ch.recv_case() for ch in chans]
        count = [0] * 4
        for _ in range(rounds):
            i, v = px.select(*cases)
            assert v == i
            count[i] += 1
            chans[i].send(i)                # ready again
        for c in count:
            assert rounds / 4 * 0.9 < c < rounds / 4 * 1.1, count
    run(body)


def test_losing_cases_leave_nothing_queued():
    # A select waits on a send, a receive, an event and a semaphore; the
    # semaphore wins.  Then nothing of it is left: the send's value was never
    # delivered, the unit is the select's, no waiter is queued anywhere.
    def body():
        a, b, s, e = px.Channel(), px.Channel(), px.Semaphore(0), px.Event()
        seen = []

        def release():
            seen.append((a.waiters, b.waiters, e.waiters, s.waiters))
            s.release()
        f = px.spawn(release)
        assert px.select(a.send_case("never"), b.recv_case(), e.wait_case(),
                         s.acquire_case()) == (3, None)
        f.join()
        assert seen == [(1, 1, 1, 1)]       # it waited on all four
        assert (s.value, s.waiters, a.waiters, b.waiters, e.waiters) == (0, 0, 0, 0, 0)
        assert a.try_recv() == (False, None)     # the send's value never went out
        assert a._values == {}                    # nor is it kept for a receiver
        assert e.set() == 0                       # nobody waits on it
    run(body)


def test_a_losing_send_is_never_delivered():
    # A select offers 1 on a and 3 on b; a receiver takes one value from a,
    # then one from b, where a plain sender offers 30: it gets 30, so the
    # select's offer on b was withdrawn when the one on a was taken.
    def body():
        a, b = px.Channel(), px.Channel()
        sent = []
        s1 = px.spawn(lambda: sent.append(px.select(a.send_case(1), b.send_case(3))))
        until(lambda: a.waiters == 1)
        got = []
        r = px.spawn(lambda: got.extend([a.recv(), b.recv()]))
        plain = px.spawn(b.send, 30)
        r.join()
        plain.join()
        s1.join()
        assert sent == [(0, None)] and got == [1, 30]
        assert b.try_recv() == (False, None)
        assert a._values == {} and b._values == {}
    run(body)


def test_default_case_fires_when_nothing_is_ready():
    def body():
        a, s = px.Channel(), px.Semaphore(0)
        assert px.select(a.recv_case(), s.acquire_case(), default="none") == (None, "none")
        assert a.waiters == 0 and s.waiters == 0
        s.release()
        assert px.select(a.recv_case(), s.acquire_case(), default="none") == (1, None)
        assert s.value == 0
        assert px.select(default=None) == (None, None)
    run(body)


def test_default_case_works_off_fiber():
    # A select with a default never waits, so it needs no fiber (the rest of
    # the sync family's calls raise NoFiberError off-fiber).
    a = px.Channel(1)
    assert px.select(a.recv_case(), default=False) == (None, False)
    sent = a.send_case("x")
    assert px.select(sent, default=False) == (0, None)
    assert px.select(sent, default=False) == (None, False)    # full: nothing kept
    assert len(a._values) == 1
    with pytest.raises(px.NoFiberError):
        px.select(a.recv_case())            # it would have to wait
    assert px.select(a.recv_case(), default=False) == (0, "x")
    assert a._values == {}
    assert run(lambda: px.select(a.recv_case(), default=1)) == (None, 1)   # a run may use it


def test_a_closed_channel_fires_with_closed():
    def body():
        a, b = px.Channel(1), px.Channel()
        a.send(9)
        a.close()
        assert px.select(a.recv_case(), b.recv_case()) == (0, 9)   # buffered first
        with pytest.raises(px.Closed) as e:
            px.select(b.recv_case(), a.recv_case())                # then the close
        assert e.value.index == 1
        with pytest.raises(px.Closed) as e:
            px.select(a.send_case(1), b.recv_case())
        assert e.value.index == 0 and a._values == {}
        c = px.Channel()                                           # closed while it waits
        f = px.spawn(c.close)
        with pytest.raises(px.Closed) as e:
            px.select(b.recv_case(), c.recv_case())
        assert e.value.index == 1
        f.join()
        assert b.waiters == 0 and c.waiters == 0
    run(body)


def test_event_and_semaphore_cases():
    def body():
        e, s = px.Event(), px.Semaphore(0)
        woke = []
        f = px.spawn(lambda: woke.append(e.set()))
        assert px.select(s.acquire_case(), e.wait_case()) == (1, None)
        f.join()
        assert woke == [1] and s.waiters == 0 and e.waiters == 0
        assert px.select(s.acquire_case(), e.wait_case()) == (1, None)    # set: at once
        e.clear()
        f = px.spawn(s.release)
        assert px.select(s.acquire_case(), e.wait_case()) == (0, None)
        f.join()
        assert s.value == 0 and s.waiters == 0     # the unit is the select's
    s = px.Semaphore(1)
    run(lambda: px.select(s.acquire_case()))
    assert s.value == 0
    run(body)


def test_fd_cases():
    r, w = os.pipe()
    os.set_blocking(r, False)

    def body():
        a = px.Channel()
        f = px.spawn(os.write, w, b"x")
        assert px.select(a.recv_case(), px.readable_case(r)) == (1, None)
        f.join()
        assert px.select(a.recv_case(), px.readable_case(r)) == (1, None)   # still readable
        assert os.read(r, 1) == b"x"
        f = px.spawn(px.notify_closing, r)               # closed while it waits
        with pytest.raises(px.ClosedResourceError) as e:
            px.select(a.recv_case(), px.readable_case(r))
        assert e.value.index == 1
        f.join()
        f = px.spawn(os.write, w, b"y")                  # the fd is free again
        px.wait_readable(r)
        f.join()
        assert px.select(px.writable_case(w)) == (0, None)
        with open(os.devnull, "rb") as dev:              # anything with fileno()
            case = px.readable_case(dev)
            assert "fd" in repr(case)
        assert a.waiters == 0
    try:
        run(body)
    finally:
        os.close(r)
        os.close(w)


def test_deadline_case_fires_when_nothing_else_does():
    def body():
        a = px.Channel()
        t0 = px.now()
        cases = (a.recv_case(), px.deadline_case(t0 + 0.02), px.deadline_case(t0 + 0.01))
        assert px.select(*cases) == (2, None)            # the earliest one
        assert px.now() >= t0 + 0.01
        assert px.select(*cases)[0] in (1, 2)            # passed: ready at once
        assert px.select(a.recv_case(), px.deadline_case(t0 - 5)) == (1, None)
        assert px.select(a.recv_case(), px.deadline_case(-float("inf")))[0] == 1
        with px.move_on_after(0.005) as scope:           # math.inf never fires
            px.select(px.deadline_case(float("inf")))
        assert scope.expired
        px.sleep(0.001)                                  # no scope of it is left
        assert a.waiters == 0
    run(body)


def test_a_scope_ends_the_wait_and_nothing_is_taken():
    def body():
        a, s = px.Channel(), px.Semaphore(0)
        with pytest.raises(px.Timeout):
            with px.timeout(0.001):
                px.select(a.send_case(1), s.acquire_case())
        assert s.waiters == 0 and a.waiters == 0
        assert a.try_recv() == (False, None) and a._values == {}
        tok = px.CancellationToken()
        f = px.spawn(tok.cancel)
        with pytest.raises(px.Cancelled):
            with px.cancel_scope(tok):
                px.select(a.recv_case(), s.acquire_case())
        f.join()
        assert s.waiters == 0 and a.waiters == 0
    run(body)


def test_cases_without_an_object_never_fire():
    def body():
        t = px.now()
        assert px.select(None, None, px.deadline_case(t + 0.001)) == (2, None)
        with pytest.raises(px.Timeout):
            with px.timeout(0.001):
                px.select(None, None)
        with pytest.raises(px.Timeout):
            with px.timeout(0.001):
                px.select()                     # no case: only a scope ends it
        assert px.select(None, default=1) == (None, 1)
    run(body)


def test_two_selects_meet_on_a_channel():
    # A select sending and a select receiving meet on an unbuffered channel:
    # the value one sent is the value the other received, on one channel.
    def body():
        a, b = px.Channel(), px.Channel()
        for first in (False, True):
            got = []
            f = px.spawn(lambda: got.append(px.select(a.recv_case(), b.recv_case())))
            if first:
                until(lambda: a.waiters == 1)
            sent_on, _ = px.select(a.send_case(11), b.send_case(12))
            f.join()
            assert got == [(sent_on, 11 + sent_on)]
            assert a._values == {} and b._values == {}
    run(body)


def test_hostile_arguments():
    def body():
        ch = px.Channel()
        for bad in (1, "x", ch, (2, None)):
            with pytest.raises(TypeError):
                px.select(bad, default=None)
        with pytest.raises(TypeError):
            px.select(ch.recv_case(), ch)
        with pytest.raises(px.InvalidArgument):
            px.readable_case(-1)
        with pytest.raises(TypeError):
            px.readable_case("3")
        with pytest.raises(TypeError):
            px.writable_case(object())
        with pytest.raises(TypeError):
            px.deadline_case("soon")
        with pytest.raises(TypeError):
            px.deadline_case(True)
        with pytest.raises(px.InvalidArgument):
            px.deadline_case(float("nan"))
        r, w = os.pipe()
        os.close(r)
        os.close(w)
        with pytest.raises(px.InvalidArgument):
            px.select(px.readable_case(r))     # not open
        big = px.deadline_case(10 ** 30)       # saturates: never
        assert px.select(big, default=0) == (None, 0)
        assert ch.waiters == 0 and ch._values == {}
    run(body)
    # a send case whose select raised leaves no value behind
    ch = px.Channel()
    with pytest.raises(px.NoFiberError):
        px.select(ch.send_case(1))
    assert ch._values == {}
