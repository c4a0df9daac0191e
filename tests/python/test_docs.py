"""The examples of docs/python.md and docs/examples/timer_demo.py run and exit 0."""
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "python.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S) if DOC.exists() else []


def run(args):
    r = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    return r.stdout


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_doc_example_runs(code):
    run(["-c", code])


def test_there_are_examples():
    assert len(BLOCKS) >= 5


def test_demo_runs():
    out = run([str(ROOT / "docs" / "examples" / "timer_demo.py")])
    assert "periodic timer ends" in out and out.rstrip().endswith("done")
