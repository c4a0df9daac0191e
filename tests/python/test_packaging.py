"""Packaging: the sdist holds the sources and the licence, never a build's output;
the installed wheel carries the licence too."""
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# What a build leaves in a source tree: an earlier `pip install .` (its build
# directory, CMake objects and the compiled extension under it), an in-place
# build's extension in the package, a stray object file next to its source.
ARTIFACTS = [
    "build-py/cp311-cp311-linux_x86_64/core/CMakeFiles/parataxis.dir/src/queue.c.o",
    "build-py/cp311-cp311-linux_x86_64/bindings/python/_parataxis.cpython-311-x86_64-linux-gnu.so",
    "build-py/cp311-cp311-linux_x86_64/CMakeCache.txt",
    "build/cp311-cp311-linux_x86_64/core/libparataxis.so.0",
    "build/CMakeCache.txt",
    "bindings/python/parataxis/_parataxis.cpython-311-x86_64-linux-gnu.so",
    "bindings/python/parataxis/libparataxis.so",
    "core/src/queue.o",
    "_skbuild/linux-x86_64-3.11/cmake-build/CMakeCache.txt",
]


def _project_files():
    """The project's files: tracked or new, not ignored (git), else all of them."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT, check=True, capture_output=True).stdout
        return [p for p in out.decode().split("\0") if p and (ROOT / p).is_file()]
    except (OSError, subprocess.CalledProcessError):
        return [str(p.relative_to(ROOT)) for p in ROOT.rglob("*")
                if p.is_file() and ".git" not in p.parts]


@pytest.fixture(scope="module")
def sdist_members(tmp_path_factory):
    pytest.importorskip("scikit_build_core.build")
    src = tmp_path_factory.mktemp("src")
    out = tmp_path_factory.mktemp("dist")
    for rel in _project_files():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, src / rel)
    for rel in ARTIFACTS:
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_bytes(b"\x7fELF not a source")
    # The PEP 517 hook, as `python -m build --sdist` would call it.
    code = ("import sys; from scikit_build_core.build import build_sdist; "
            "print(build_sdist(sys.argv[1]))")
    proc = subprocess.run([sys.executable, "-c", code, str(out)], cwd=src,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    name = proc.stdout.strip().splitlines()[-1]
    with tarfile.open(out / name) as tar:
        names = tar.getnames()
    top = names[0].split("/")[0]
    return {n[len(top) + 1:] for n in names if n.startswith(top + "/")}


def test_sdist_has_no_build_output(sdist_members):
    built = [m for m in sdist_members
             if m.endswith((".o", ".a", ".so")) or ".so." in m
             or m.split("/")[0].startswith(("build", "_skbuild"))
             or m.endswith("CMakeCache.txt")]
    assert built == []


def test_sdist_has_the_sources_and_the_licence(sdist_members):
    # Every file of the Python binding and of the layer it shares with Lua.
    binding = [rel for rel in _project_files()
               if rel.startswith(("bindings/python/", "bindings/host/"))]
    assert "bindings/python/parataxis/__init__.py" in binding
    for rel in ["LICENSE", "pyproject.toml", "CMakeLists.txt", "docs/python.md",
                "core/include/parataxis.h", "core/src/timerq/queue.c", *binding]:
        assert rel in sdist_members, rel


def test_metadata_needs_greenlet_and_python_3_10():
    # _host.c uses Py_NewRef (3.10) and greenlet's C API (3.0), at build and run time.
    text = (ROOT / "pyproject.toml").read_text()
    assert 'requires-python = ">=3.10"' in text
    assert text.count('"greenlet>=3.0"') == 2, "build-system requires and dependencies"


def test_installed_wheel_has_the_fiber_modules_and_types():
    try:
        dist = importlib.metadata.distribution("parataxis")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("parataxis is not installed as a distribution")
    names = {Path(str(f)).name for f in dist.files or []
             if Path(str(f)).parts[0] == "parataxis"}
    for name in ["_fibers.py", "_sync.py", "_errors.py", "py.typed", "_host.pyi",
                 "_parataxis.pyi"]:
        assert name in names, name
    assert any(n.startswith("_host.") and n.endswith(".so") for n in names), names
    assert "_host.c" not in names
    assert "greenlet>=3.0" in (dist.requires or [])


def test_repository_has_the_mit_licence():
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License")
    assert "The Parataxis developers" in text
    assert 'license = { text = "MIT" }' in (ROOT / "pyproject.toml").read_text()


def test_installed_wheel_carries_the_licence():
    try:
        dist = importlib.metadata.distribution("parataxis")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("parataxis is not installed as a distribution")
    files = [Path(str(f)) for f in dist.files or []]
    licences = [f for f in files
                if f.name == "LICENSE" and f.parts[0].endswith(".dist-info")]
    assert licences, [str(f) for f in files]
    text = Path(dist.locate_file(licences[0])).read_text()
    assert "The Parataxis developers" in text
