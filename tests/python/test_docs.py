"""The examples of docs/python.md run, exit 0 and print exactly the output shown
after each (a ```text block: the same lines in the same order, every run); the
README's Python snippets show an expired timer and a drained channel; docs/examples/timer_demo.py runs."""
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "python.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S) if DOC.exists() else []
# Each python block with the text block that follows it (None when another kind
# of block, or none, comes first).
FENCES = re.findall(r"```(\w*)\n(.*?)```", DOC.read_text(), re.S) if DOC.exists() else []
OUTPUTS = [FENCES[i + 1][1] if i + 1 < len(FENCES) and FENCES[i + 1][0] == "text" else None
           for i, (lang, _) in enumerate(FENCES) if lang == "python"]
README = ROOT / "README.md"


def run(args):
    r = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    return r.stdout


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_doc_example_runs(code):
    run(["-c", code])


@pytest.mark.parametrize("i", range(len(BLOCKS)), ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_doc_example_prints_what_the_doc_shows(i):
    assert OUTPUTS[i] is not None, "the example is not followed by its output"
    for _ in range(2):                  # the same every run
        assert run(["-c", BLOCKS[i]]) == OUTPUTS[i]


def test_readme_snippets_show_an_expired_timer_and_a_channel_drained():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert [run(["-c", code]) for code in blocks] == ["expired\n", "[0, 1, 2]\n"]


def test_there_are_examples():
    assert len(BLOCKS) >= 5


def test_demo_runs():
    out = run([str(ROOT / "docs" / "examples" / "timer_demo.py")])
    assert "periodic, final call" in out and out.rstrip().endswith("done")
