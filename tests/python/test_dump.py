"""px.dump(): every live fiber of the run with its state, what it waits for
and who holds it, how long it waited and where it is (its Python stack); and
the C library's table on a signal (px.dump_signal), with each greenlet's
stack, whether the run's fibers run or it waits in the kernel."""
import io
import os
import re
import socket
import subprocess
import sys
import textwrap

import parataxis as px

TIMEOUT = 10.0


def by_number(records):
    return {r.number: r for r in records}


def parked_here(ev):
    ev.wait()


def test_lists_every_live_fiber_with_its_state():
    def main():
        ev = px.Event()
        ended = px.spawn(lambda: None)
        parked = px.spawn(parked_here, ev)
        px.yield_()                     # both ran: one ended, one waits
        ready = px.spawn(parked_here, ev)   # not started yet
        out = io.StringIO()
        records = px.dump(file=out)
        ev.set()
        ready.join()
        parked.join()
        return ended, parked, ready, records, out.getvalue()
    ended, parked, ready, records, text = px.run(main)
    assert [(r.number, r.state) for r in records] == [
        (1, "running"), (parked.number, "parked"), (ready.number, "ready")]
    assert ended.number not in by_number(records)
    assert [r.id for r in records][1:] == [parked.id, ready.id]
    assert all(isinstance(r, px.FiberInfo) for r in records)
    lines = text.splitlines()
    assert lines[0].startswith("parataxis: the fibers of this run")
    assert lines[-1] == "  (3 live)"
    assert re.search(r'^  fiber 1 "[^"]*main": running$', text, re.M), text
    assert f'  fiber {parked.number} "parked_here": parked for ' in text, text
    assert f'  fiber {ready.number} "parked_here": ready' in text, text


def test_names_what_each_fiber_waits_for_and_who_holds_it():
    a, b = socket.socketpair()
    fd = a.fileno()

    def holder(m):
        with m:
            px.sleep(3600)

    def main():
        m = px.Mutex(name="accounts")
        ch = px.Channel(name="jobs")
        h = px.spawn(holder, m, name="holder")
        px.yield_()                     # it holds the mutex, and sleeps
        w = px.spawn(m.lock, name="transfer")
        r = px.spawn(ch.recv, name="consumer")
        f = px.spawn(px.wait_readable, a, name="reader")
        px.yield_()
        now = px.now()
        records = by_number(px.dump(file=io.StringIO()))
        text = io.StringIO()
        px.dump(file=text)
        for fiber in (h, w, r, f):
            fiber_records[fiber.name] = records[fiber.number]
        fiber_records["now"] = now
        fiber_records["text"] = text.getvalue()
        px.current_fiber().name = "main"
        h_number.append(h.number)
        px.run_blocking(b.send, b"x")   # the reader goes
        ch.close()                      # the consumer goes (Closed)
        for fiber in (f, r):
            try:
                fiber.join()
            except px.Closed:
                pass
        raise SystemExit                # cancels the holder's sleep and the transfer
    fiber_records, h_number = {}, []
    try:
        px.run(main)
    except SystemExit:
        pass
    finally:
        a.close()
        b.close()
    holder_rec, transfer, consumer, reader = (fiber_records[k] for k in (
        "holder", "transfer", "consumer", "reader"))
    now = fiber_records["now"]
    assert (holder_rec.state, holder_rec.reason) == ("parked", "sleep")
    assert 3500 < holder_rec.deadline - now <= 3600           # on px.now()'s clock
    assert (transfer.reason, transfer.kind, transfer.object_name) == (
        "Mutex lock", "mutex", "accounts")
    assert transfer.holders == (h_number[0],) and transfer.deadline is None
    assert (consumer.reason, consumer.kind, consumer.object_name) == (
        "Channel recv", "channel", "jobs")
    assert consumer.holders == ()
    assert (reader.kind, reader.fd, reader.events) == ("fd", fd, "readable")
    assert transfer.fd is None and transfer.events is None
    text = fiber_records["text"]
    assert re.search(r'fiber \d+ "transfer": parked for \d+\.\d{3} s on "Mutex lock", '
                     rf'waits on mutex "accounts" held by fiber {h_number[0]} "holder"', text)
    assert '"consumer": parked for' in text and 'waits on channel "jobs"' in text, text
    assert '"reader": parked for' in text and f"fd {fd} readable" in text, text
    assert re.search(r'"holder": parked for \d+\.\d{3} s on "sleep", deadline in 3\d{3}\.\d{3} s',
                     text), text


def test_shows_where_each_fiber_is():
    def deep_inside(ev):
        parked_here(ev)

    def main():
        ev = px.Event()
        f = px.spawn(deep_inside, ev)
        px.yield_()
        records = by_number(px.dump(file=None))
        not_started = px.spawn(deep_inside, ev)
        fresh = by_number(px.dump(file=None))[not_started.number]
        ev.set()
        f.join()
        not_started.join()
        return records[1], records[f.number], fresh
    me, parked, fresh = px.run(main)
    names = [fs.name for fs in parked.stack]
    assert names[:2] == ["deep_inside", "parked_here"] and names[-1] == "wait", names
    assert parked.stack[1].filename == __file__
    assert parked.stack[1].lineno == parked_here.__code__.co_firstlineno + 1
    assert [fs.name for fs in me.stack][-1] == "main"   # the caller: where it called dump
    assert "_main" not in [fs.name for fs in me.stack]
    assert list(fresh.stack) == []                      # not started: no stack yet


def test_tells_how_long_each_fiber_waited():
    def main():
        ev = px.Event()
        f = px.spawn(parked_here, ev)
        px.yield_()
        px.sleep(5)                     # the virtual clock jumps 5 s
        records = by_number(px.dump(file=None))
        text = io.StringIO()
        px.dump(file=text)
        ev.set()
        f.join()
        return records[f.number], records[1], text.getvalue()
    parked, me, text = px.run(main, clock=px.VirtualClock())
    assert abs(parked.waited - 5.0) < 0.01, parked.waited     # stamped to the millisecond
    assert me.waited == 0.0
    assert re.search(r'"parked_here": parked for (4\.99\d|5\.00\d) s on "Event wait"', text), text


# -- on a signal: the C library's table, on C's stderr ---------------------------------

PRELUDE = textwrap.dedent('''
    import os, signal, sys, time
    import parataxis as px

    ERR = sys.argv[1]                   # this process's stderr: the dump goes there

    def dumped():
        with open(ERR) as f:
            return "live)" in f.read()

    def parked_here(ev):
        ev.wait()
    px.dump_signal(signal.SIGUSR1)
''')


def run_script(tmp_path, body):
    """Runs PRELUDE + body in a new interpreter whose stderr is a file;
    returns what it wrote there."""
    err = tmp_path / "stderr.txt"
    with open(err, "w") as f:
        r = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(body), str(err)],
                           stdout=subprocess.PIPE, stderr=f, text=True, timeout=60)
    text = err.read_text()
    assert r.returncode == 0, text
    assert r.stdout == "ok\n", (r.stdout, text)
    return text


def check_table(text):
    assert "parataxis: the fibers of scheduler" in text, text
    assert '  fiber 1 "main": ' in text, text
    assert re.search(r'  fiber 2 "waiter": parked for \d+\.\d{3} s on "Event wait", '
                     r'waits on event "gate"@0x[0-9a-f]+\n', text), text
    # each greenlet's Python stack, below its fiber's line
    assert re.search(r'fiber 2 "waiter".*\n\s+File "<string>", line \d+, in parked_here\n',
                     text), text
    assert "Traceback" not in text, text


def test_from_a_signal_while_fibers_run(tmp_path):
    text = run_script(tmp_path, '''
        def spin():
            end = time.monotonic() + 10
            while not dumped():         # fibers keep running until the table is out
                assert time.monotonic() < end, "no dump came"
                px.yield_()

        def main():
            ev = px.Event(name="gate")
            px.spawn(parked_here, ev, name="waiter")
            s = px.spawn(spin)
            px.yield_()
            os.kill(os.getpid(), signal.SIGUSR1)
            s.join()
            ev.set()
        px.run(main)
        px.dump_signal(None)
        print("ok")
    ''')
    check_table(text)
    assert re.search(r'  fiber 1 "main": parked for \d+\.\d{3} s on "fiber join", waits on '
                     r'fiber@0x[0-9a-f]+ held by fiber 3\b', text), text
    assert re.search(r'  fiber 3 "spin": ready\n\s+File "<string>", line \d+, in spin',
                     text), text


def test_from_a_signal_while_the_run_waits_in_the_kernel(tmp_path):
    text = run_script(tmp_path, '''
        import threading
        r, w = os.pipe()

        def signaller():                # from outside: the run waits in the kernel
            os.kill(os.getpid(), signal.SIGUSR1)
            end = time.monotonic() + 10
            while not dumped() and time.monotonic() < end:
                time.sleep(0.005)
            os.write(w, b"x")           # then lets the run go on

        def main():
            ev = px.Event(name="gate")
            px.spawn(parked_here, ev, name="waiter")
            px.yield_()
            t = threading.Thread(target=signaller)
            t.start()
            px.wait_readable(r)         # every fiber waits: the run is in the kernel
            t.join()
            ev.set()
            assert dumped(), "no dump came"
        px.run(main)
        px.dump_signal(None)
        print("ok")
    ''')
    check_table(text)
    assert re.search(r'fiber 1 "main": parked for \d+\.\d{3} s on "fd readable", fd \d+ readable'
                     r'\n\s+File "<string>", line \d+, in main', text), text
