#!/usr/bin/env python3
"""The conformance check: every behaviour of tests/behaviours.txt has a test of
its name in each language the list gives it, and every test of the three suites
is a behaviour of the list.  Run by `make check` (test-conformance).

    python3 tests/conformance.py [--build DIR]   check; exit 1 on any difference
    python3 tests/conformance.py --suggest       print list lines for the tests
                                                 the list lacks (to paste, then
                                                 give each its languages' reasons)

How each language's names are collected (the rule is also at the top of
tests/behaviours.txt):
  C       `ctest -N` of the plain build tree (build/): every ctest is
          <group>.<name> (tests/c/CMakeLists.txt).
  Python  the tests pytest collects in tests/python: test_<name> counts as
          <group>.<name>, the group being the `group` mark of the test, its
          class or its module (pytestmark), else the module's name without
          test_; a test parametrized over `k`, a row of the sync family's table
          (test_sync_family.py), counts once for the row's `group`.
  Lua     `busted --list` of tests/lua: it("<name>") inside
          describe("<group>") counts as <group>.<name>; both are made names by
          lowercasing and turning each run of other characters than [a-z0-9_]
          into one _.
"""
import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIST = os.path.join(ROOT, "tests", "behaviours.txt")
LANGS = ("c", "py", "lua")
NAME = re.compile(r"^[a-z0-9_]+\.[a-z0-9_]+$")


def read_list(path):
    """{name: (set of languages, reason)}; exits on a malformed line."""
    out, bad = {}, []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            text, _, reason = line.partition("#")
            words = text.split()
            if not words:
                continue
            name, langs = words[0], set(words[1:])
            if not NAME.match(name) or not langs <= set(LANGS) or name in out:
                bad.append(f"{path}:{n}: {line.rstrip()}")
                continue
            why = reasons(reason)
            if set(why) != set(LANGS) - langs:
                bad.append(f"{path}:{n}: {name}: a reason for each language it lacks, "
                           "and for no other (`py: n/a, ...; lua: n/a, ...`)")
            elif not all(w.startswith("n/a, ") for w in why.values()):
                bad.append(f"{path}:{n}: {name}: a language it lacks needs a test of "
                           "this name, or `n/a, <why it does not apply>`")
            out[name] = (langs, why)
    if bad:
        sys.exit("conformance: malformed lines of the list:\n  " + "\n  ".join(bad))
    return out


def reasons(text):
    """{language: its reason} of a line's comment, `c, lua: n/a, why; py: n/a, why`."""
    out = {}
    for clause in filter(None, (c.strip() for c in text.split(";"))):
        langs, _, why = clause.partition(":")
        for lang in (w.strip() for w in langs.split(",")):
            out[lang] = why.strip()
    return out


def c_names(build):
    """The ctests of the build tree."""
    if not os.path.isfile(os.path.join(build, "CTestTestfile.cmake")):
        sys.exit(f"conformance: no build tree at {build} (make build first)")
    out = subprocess.run(["ctest", "-N"], cwd=build, capture_output=True, text=True,
                         check=True).stdout
    return set(re.findall(r"^\s*Test\s+#\d+: (\S+)$", out, re.M))


class _PyCollector:
    """A pytest plugin that keeps the collected items' behaviour names."""

    def __init__(self):
        self.names = set()

    def pytest_collection_modifyitems(self, items):
        for item in items:
            self.names.add(py_name(item))


def py_name(item):
    """<group>.<name> of one collected pytest item, by the rule above."""
    name = item.originalname if hasattr(item, "originalname") else item.name
    name = re.sub(r"^test_", "", name.split("[")[0])
    spec = getattr(item, "callspec", None)
    if spec is not None and hasattr(spec.params.get("k"), "group"):
        return f"{spec.params['k'].group}.{name}"
    mark = item.get_closest_marker("group")
    if mark is not None:
        return f"{mark.args[0]}.{name}"
    module = os.path.basename(item.fspath.strpath)[:-3]
    return f"{re.sub(r'^test_', '', module)}.{name}"


def py_names():
    """The Python suite's names, collected (not run) by pytest in-process."""
    import pytest
    collector = _PyCollector()
    sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
    with open(os.devnull, "w") as null:
        saved = sys.stdout
        sys.stdout = null
        try:
            rc = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider",
                              os.path.join(ROOT, "tests", "python")], plugins=[collector])
        finally:
            sys.stdout = saved
    if rc != 0:
        sys.exit(f"conformance: pytest could not collect tests/python (exit {rc})")
    return collector.names


def lua_word(text):
    return re.sub(r"[^a-z0-9_]+", "_", text.lower()).strip("_")


def lua_names(build):
    """The Lua suite's names, from busted --list (no test runs)."""
    env = dict(os.environ,
               LUA_CPATH=os.path.join(build, "bindings", "?.so") + ";;",
               LUA_PATH=os.path.join(ROOT, "bindings", "lua", "?.lua") + ";;")
    out = subprocess.run(["busted", "--lua=lua5.4", "--list", "tests/lua"], cwd=ROOT,
                         env=env, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("conformance: busted --list failed:\n" + out.stdout + out.stderr)
    names = set()
    for line in out.stdout.splitlines():
        m = re.match(r"^\S+:\d+: (\S+) (.+)$", line)
        if m:
            names.add(f"{lua_word(m.group(1))}.{lua_word(m.group(2))}")
    return names


def differences(listed, found):
    """Per language: (behaviours with no test, tests not in the list)."""
    out = {}
    for lang, names in found.items():
        want = {n for n, (langs, _) in listed.items() if lang in langs}
        out[lang] = (sorted(want - names), sorted(names - want))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--suggest", action="store_true")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    listed = read_list(LIST)
    found = {"c": c_names(build), "py": py_names(), "lua": lua_names(build)}
    diff = differences(listed, found)
    if args.suggest:
        extra = sorted({n for _, (_, more) in diff.items() for n in more})
        for name in extra:
            langs = " ".join(lang for lang in LANGS if name in found[lang])
            print(f"{name:<80} {langs}")
        return 0
    failed = False
    for lang in LANGS:
        missing, unlisted = diff[lang]
        for name in missing:
            print(f"{lang}: no test for {name}")
        for name in unlisted:
            print(f"{lang}: {name} is not in tests/behaviours.txt (or not for {lang})")
        failed |= bool(missing or unlisted)
        have = sum(1 for n, (langs, _) in listed.items() if lang in langs)
        print(f"conformance: {lang}: {have - len(missing)} of {len(listed)} behaviours "
              f"tested, {len(listed) - have} not applying")
    if failed:
        print("conformance: the suites and tests/behaviours.txt differ (see above)")
        return 1
    print("conformance: every listed behaviour is tested where it applies")
    return 0


if __name__ == "__main__":
    sys.exit(main())
