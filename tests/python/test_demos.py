"""make demo's Python programs (docs/examples/*.py), their stdout and stderr
piped together as `make demo | cat` shows them: each exits 0, stamps every line
after its first with the time, and prints the lines the C and Lua demos print
too (tests/install/demo_c.sh, tests/lua/demo_spec.lua), in the same order."""
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
STAMP = re.compile(r"^ *\d+\.\d ms  ")


def piped(name):
    r = subprocess.run([sys.executable, str(ROOT / "docs" / "examples" / name)],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    assert r.returncode == 0, r.stdout
    return r.stdout.splitlines()


def line_of(lines, text):
    return next(i for i, line in enumerate(lines) if text in line)


def test_timer_demo_prints_what_the_other_languages_print():
    lines = piped("timer_demo.py")
    assert re.match(r"parataxis .* from Python$", lines[0])
    assert all(STAMP.match(line) for line in lines[1:]), lines
    body = [STAMP.sub("", line) for line in lines[1:]]
    for want in ["cancel the 20 ms timer: True", "one-shot, 20 ms, cancelled   aborted",
                 "one-shot, 10 ms              expired", "one-shot, 30 ms              expired",
                 "periodic, tick 1", "periodic, tick 2", "periodic, tick 3",
                 "periodic, final call         aborted"]:
        assert want in body, lines
    assert body.index("periodic, tick 3") < body.index("periodic, final call         aborted")
    assert body.index("cancel the 20 ms timer: True") < body.index("one-shot, 20 ms, cancelled   aborted")
    assert body[-1].startswith("every handler ran exactly once")


def test_fiber_demo_prints_what_the_other_languages_print_in_order():
    lines = piped("fiber_demo.py")
    text = "\n".join(lines)
    for want in ["left got 0", "right got 1", "pipeline total = 10",
                 "the mutex went to the fibers in the order they asked: 1, 2, 3, 4",
                 "fired at the interrupted wait"]:
        assert want in text, text
    assert text.count("timer handler fired in a fiber") == 2, text
    for want in ['fiber 2 "transfer a->b": parked', 'waits on mutex "account b"@',
                 'held by fiber 3 "transfer b->a"']:
        assert want in text, text
    order = [line_of(lines, t) for t in ("timer handler fired in a fiber", "px.dump() while they wait",
                                         "the engine's report", "deadlock detected",
                                         "wait-for cycle")]
    assert order == sorted(order), text


def test_io_demo_serves_its_clients_and_stops():
    lines = piped("io_demo.py")
    assert re.match(r"echo server on 127\.0\.0\.1, port \d+$", lines[0])
    for i in range(3):
        assert f'client {i} got back "hello from client {i}"' in lines, lines
    assert lines[-3:] == ["recv on a quiet socket for 20 ms: ended by its scope: True",
                          "os.read on the blocking pool got b'written by a fiber'",
                          "server stopped: its listener was closed"]
