"""Names and numbers: a fiber is named after its function unless spawn was
given a name, numbers count from 1 in each run, and deadlock reports print
`fiber <number> "<name>"` and the names of the objects."""
import re
import threading
import time

import pytest

import parataxis as px


def work():
    return px.current_fiber().name


def test_a_fiber_is_named_after_its_function_by_default():
    class Service:
        def serve(self):
            return px.current_fiber().name

    def main():
        me = px.current_fiber()
        assert me.name == main.__qualname__
        f = px.spawn(work)
        named = px.spawn(work, name="poller")
        method = px.spawn(Service().serve)
        with px.group() as g:
            member = g.spawn(work)
            named_member = g.spawn(work, name="member")
            records = {r.number: r.name for r in px.dump(file=None)}   # as C has them
        assert (f.name, named.name) == ("work", "poller")
        assert method.name == Service.serve.__qualname__
        assert (member.name, named_member.name) == ("work", "member")
        assert records == {me.number: main.__qualname__, f.number: "work",
                           named.number: "poller", method.number: Service.serve.__qualname__,
                           member.number: "work", named_member.number: "member"}
        results = [x.join() for x in (f, named, method, member, named_member)]
        me.name = "renamed"             # the current fiber renames itself
        assert px.current_fiber().name == "renamed"
        assert {r.number: r.name for r in px.dump(file=None)}[me.number] == "renamed"
        return results
    assert px.run(main) == ["work", "poller", "test_a_fiber_is_named_after_its_function_"
                            "by_default.<locals>.Service.serve", "work", "member"]


def test_naming_an_unknown_or_ended_fiber_is_refused():
    kept = []

    def main():
        f = px.spawn(work)
        f.join()
        with pytest.raises(px.NoFiberError, match="ended"):
            f.name = "too late"         # ended
        assert f.name == "work"         # unchanged
        live = px.spawn(px.sleep, 0)
        with pytest.raises(TypeError):
            live.name = 42
        live.name = None                # unnamed
        assert live.name is None
        live.join()
        with pytest.raises(TypeError):
            px.Mutex(name=3.5)
        kept.append(f)

    px.run(main)

    def main2():
        f = px.spawn(px.sleep, 0)
        kept.append(f)
        f.join()

    px.run(main2)
    other = []

    def main3():
        with pytest.raises(px.NoFiberError):
            kept[1].name = "another run's"  # a fiber of an earlier run
        stop = threading.Event()

        def thread_run():
            def main_elsewhere():
                other.append(px.current_fiber())
                while not stop.is_set():
                    px.sleep(0.001)
            px.run(main_elsewhere)
        t = threading.Thread(target=thread_run)
        t.start()
        try:
            end = time.monotonic() + 10
            while not other:            # the other run's main fiber has started
                assert t.is_alive() and time.monotonic() < end, "the other run did not start"
                px.sleep(0.001)
            with pytest.raises(px.NoFiberError, match="not of this run"):
                other[0].name = "another thread's"   # a live fiber of another run
        finally:
            stop.set()
            t.join()
        return True
    assert px.run(main3)
    with pytest.raises(px.NoFiberError):
        kept[1].name = "off-run"
    with pytest.raises(px.NoFiberError):
        px.current_fiber()


def test_numbers_count_from_one_in_each_run():
    def main():
        me = px.current_fiber()
        fibers = [px.spawn(work) for _ in range(3)]
        with px.group() as g:
            fibers.append(g.spawn(work))
        for f in fibers:
            f.join()
        numbers = [me.number] + [f.number for f in fibers]
        dumped = [r.number for r in px.dump(file=None)]
        return numbers, dumped, me.id
    first, dumped, id1 = px.run(main)
    assert first == [1, 2, 3, 4, 5] and dumped == [1]
    again, _, id2 = px.run(main)
    assert again == [1, 2, 3, 4, 5] and id2 != id1      # ids are never reused


def test_reports_print_numbers_and_names():
    def holder(m, held):
        with m:
            held.set()
            px.Event().wait()           # nothing will set it

    def main():
        m = px.Mutex(name="accounts")
        held = px.Event()
        h = px.spawn(holder, m, held)   # named after its function
        held.wait()
        t = px.spawn(m.lock, name="transfer")
        queued = [px.spawn(m.lock) for _ in range(10)]     # numbers of two digits
        numbers.update(holder=h.number, transfer=t.number, queued=[q.number for q in queued])
        t.join()
    numbers = {}
    with pytest.raises(px.DeadlockError) as e:
        px.run(main)
    report = str(e.value)
    h, t = numbers["holder"], numbers["transfer"]
    holder_name = re.escape(holder.__qualname__)
    assert re.search(rf'fiber {t} "transfer": parked on "Mutex lock", '
                     rf'waits on mutex "accounts"@0x[0-9a-f]+ '
                     rf'held by fiber {h} "{holder_name}"\n', report), report
    assert f'fiber {h} "{holder.__qualname__}": parked on "Event wait"' in report, report
    assert f'fiber 1 "{main.__qualname__}": parked on "fiber join"' in report, report
    assert numbers["queued"][-1] >= 10
    for q in numbers["queued"]:         # named after their function, Mutex.lock
        assert re.search(rf'\n  fiber {q} "Mutex.lock": parked on "Mutex lock", waits on '
                         rf'mutex "accounts"@0x[0-9a-f]+ held by fiber {h} "{holder_name}"\n',
                         report), report
