"""mypy --strict is clean on the package, on docs/examples/*.py, on the fiber
and sync examples of docs/python.md (the python blocks that call run) and on
a user's program whose fibers, channels and scopes keep their types.
Skipped when mypy is not installed."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "python.md"

# What a user's code sees: run and join give the function's result type,
# spawn a Fiber of it, a Channel its items, a scope its own class.
USER = '''
from typing import Any, List, Optional, Tuple
from typing_extensions import assert_type

import parataxis as px


def work(n: int) -> int:
    return n * 2


def main(n: int) -> str:
    f = px.spawn(work, n)
    assert_type(f, px.Fiber[int])
    assert_type(f.join(), int)
    assert_type(f.id, int)
    assert_type(f.done, bool)
    ch: px.Channel[str] = px.Channel(1)
    ch.send("x")
    assert_type(ch.recv(), str)
    assert_type(ch.try_recv(), Tuple[bool, Optional[str]])
    items: List[str] = [v for v in ch]
    with px.move_on_after(0.01) as scope:
        px.sleep(1)
    assert_type(scope.expired, bool)
    with px.timeout(1) as t:
        assert_type(t, px.timeout)
    tok = px.CancellationToken()
    with px.cancel_scope(tok):
        px.yield_()
    m = px.Mutex()
    with m:
        assert_type(m.owner, Optional[int])
    lk = px.RwLock()
    with lk.read():
        pass
    assert_type(px.Once().do(work, 1), Optional[int])
    assert_type(px.Barrier(1).arrive_and_wait(), bool)
    px.scheduler().post(work, 3)
    fu: px.Future[int] = px.Future()
    fu.set_result(1)
    assert_type(fu.result(), int)
    assert_type(px.wait_all([fu, f]), List[Any])
    assert_type(px.wait_any([fu, f]), int)
    with px.group() as g:
        assert_type(g, px.Group)
        assert_type(g.spawn(work, 2), px.Fiber[int])
    assert_type(px.map(work, [1, 2], concurrency=2), List[int])
    assert_type(px.select(ch.recv_case(), px.deadline_case(px.now() + 1)), Tuple[int, Any])
    assert_type(px.select(ch.recv_case(), default=None), Tuple[Optional[int], Any])
    assert_type(px.spawn(work, 1, name="worker").name, Optional[str])
    assert_type(f.number, int)
    assert_type(px.current_fiber(), px.Fiber[Any])
    assert_type(px.Mutex(name="accounts").name, Optional[str])
    records = px.dump(file=None)
    assert_type(records, List[px.FiberInfo])
    assert_type(records[0].deadline, Optional[float])
    px.dump_signal(None)
    return str(f.join()) + "".join(items)


assert_type(px.run(main, 1), str)
assert_type(px.run(main, 1, clock=px.VirtualClock()), str)
'''


def _doc_fiber_blocks():
    if not DOC.exists():
        return []
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    return [b for b in blocks if re.search(r"\b(px|parataxis)\.run\(", b)]


def test_mypy_strict_is_clean(tmp_path):
    pytest.importorskip("mypy")
    files = [str(ROOT / "bindings" / "python" / "parataxis")]
    files += sorted(str(p) for p in (ROOT / "docs" / "examples").glob("*.py"))
    for i, code in enumerate(_doc_fiber_blocks()):
        p = tmp_path / f"python_md_block{i}.py"
        p.write_text(code)
        files.append(str(p))
    user = tmp_path / "user_program.py"
    user.write_text(USER)
    files.append(str(user))
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--config-file",
         str(ROOT / "pyproject.toml"), "--cache-dir", str(tmp_path / "cache"), *files],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
