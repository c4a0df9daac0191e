#!/usr/bin/env python3
"""Generate the reference part of docs/c-api.md from core/include/parataxis.h.

The header is the one source of the C reference (SQLite's rule): its comments
are the contract.  This script copies them into docs/c-api.md, between marker
lines, so that the page and the header cannot drift:

    <!-- BEGIN GENERATED name: ... -->
    ...
    <!-- END GENERATED name -->

Two regions exist: "overview" (the header's opening comment) and "reference"
(every section, comment and declaration that follows).  Everything outside the
markers is written by hand (guides and examples) and left alone.

    python3 docs/gen_capi.py           rewrite docs/c-api.md
    python3 docs/gen_capi.py --check   exit 1 if docs/c-api.md is out of date

Python 3 standard library only.
"""

import argparse
import difflib
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADER = os.path.join(ROOT, "core", "include", "parataxis.h")
PAGE = os.path.join(ROOT, "docs", "c-api.md")

BEGIN = "<!-- BEGIN GENERATED {name}: from core/include/parataxis.h by docs/gen_capi.py; edit the header, not this -->"
END = "<!-- END GENERATED {name} -->"

# Lines of the header that are plumbing, not API.
BOILERPLATE = re.compile(
    r'^(#ifndef PARATAXIS_H|#define PARATAXIS_H|#include |#ifdef __cplusplus|'
    r'extern "C" \{|\}$|#endif)')
RULE = re.compile(r"^/\* [-=]{20,} \*/$")
TITLE = re.compile(r"^/\* (.*?)\s*\*/$")
SUBSECTION = re.compile(r"^/\* -- (.*?) -+ \*/$")
NAME_IN_PROSE = re.compile(r"\b(?:px|PX)_[A-Za-z0-9_<>*]*[A-Za-z0-9_>*](?:\(\))?")


# --------------------------------------------------------------------------
# Reading the header
# --------------------------------------------------------------------------

def comment_text(lines):
    """The text of a top-level /* ... */ or /* ** ... */ comment."""
    out = []
    for i, line in enumerate(lines):
        if i == 0:
            line = line[2:]                       # "/*"
        if line.rstrip().endswith("*/"):
            line = line.rstrip()[:-2]
        if line.startswith("**"):
            line = line[2:]
            if line.startswith(" "):
                line = line[1:]
        elif i == 0:
            line = line.lstrip()
        out.append(line.rstrip())
    while out and not out[0]:
        out.pop(0)
    while out and not out[-1]:
        out.pop()
    return out


def declared_names(decl):
    """The names a group of declaration lines introduces, in order."""
    names = []
    depth = 0
    for line in decl:
        code = re.sub(r"/\*.*?(\*/|$)", "", line)
        if depth == 0:
            m = (re.match(r"#\s*define (\w+)", code)
                 or re.match(r"typedef [^;{(]*\(\s*\*\s*(\w+)\s*\)", code)
                 or re.match(r"typedef struct \w+ (\w+);", code)
                 or re.match(r"PX_API [^(]*?(\w+)\s*\(", code))
            if m:
                names.append(m.group(1))
        depth += code.count("{") - code.count("}")
        if depth == 0:
            m = re.match(r"\}\s*(\w+);", code.strip())
            if m:
                names.append(m.group(1))
    seen = []
    for n in names:
        if n not in seen:
            seen.append(n)
    return seen


def parse(path):
    """Returns (overview lines, sections); a section is a dict with a title,
    a level and items, an item being ("prose", lines) or ("entry", lines, decl)."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    i = 0
    n = len(lines)

    def read_comment(i):
        start = i
        while "*/" not in lines[i]:
            i += 1
        return lines[start:i + 1], i + 1

    while not lines[i].startswith("/*"):
        i += 1
    first, i = read_comment(i)
    overview = comment_text(first)

    sections = [{"title": None, "level": 2, "items": []}]
    pending = None          # a comment not yet followed by anything
    while i < n:
        line = lines[i]
        if RULE.match(line) and i + 2 < n and RULE.match(lines[i + 2]):
            if pending:
                sections[-1]["items"].append(("prose", pending))
                pending = None
            sections.append({"title": TITLE.match(lines[i + 1]).group(1),
                             "level": 2, "items": []})
            i += 3
            continue
        m = SUBSECTION.match(line)
        if m:
            if pending:
                sections[-1]["items"].append(("prose", pending))
                pending = None
            sections.append({"title": m.group(1), "level": 3, "items": []})
            i += 1
            continue
        if not line.strip():
            if pending:
                sections[-1]["items"].append(("prose", pending))
                pending = None
            i += 1
            continue
        if line.startswith("/*"):
            if pending:
                sections[-1]["items"].append(("prose", pending))
            raw, i = read_comment(i)
            pending = comment_text(raw)
            continue
        decl = []
        while i < n and lines[i].strip():
            if not BOILERPLATE.match(lines[i]):
                decl.append(lines[i])
            i += 1
        if not decl:
            continue
        items = sections[-1]["items"]
        if pending is not None:
            items.append(["entry", pending, decl])
            pending = None
        elif items and items[-1][0] == "entry":
            items[-1][2] = items[-1][2] + [""] + decl   # more of the same entry
        else:
            items.append(["entry", [], decl])
    if pending:
        sections[-1]["items"].append(("prose", pending))
    return overview, [s for s in sections if s["title"] or s["items"]]


# --------------------------------------------------------------------------
# Writing markdown
# --------------------------------------------------------------------------

def heading_of(names):
    if not names:
        return "(declarations)"
    first = names[0]
    if len(names) > 1 and all(x.startswith(first) for x in names[1:]):
        return first                               # px_mutex and its functions
    if len(names) <= 3:
        return ", ".join(names)
    prefix = os.path.commonprefix(names)
    tail = prefix[prefix.rfind("_") + 1:]
    if tail and not tail.isupper():
        prefix = prefix[:len(prefix) - len(tail)]   # px_scope_p -> px_scope_
    return prefix + "*" if len(prefix) > 3 else ", ".join(names[:3]) + ", ..."


def slug(title):
    s = re.sub(r"[^\w\- ]", "", title.lower()).strip()
    return re.sub(r" ", "-", s)


class Prose:
    """Turns comment text into markdown: names become code (and links to their
    entry), and what markdown would misread is escaped."""

    def __init__(self, anchors):
        self.anchors = anchors
        self.seen = set()

    def name(self, word, own):
        plain = word[:-2] if word.endswith("()") else word
        if plain in self.anchors and plain not in own and plain not in self.seen:
            self.seen.add(plain)                    # link a name once a block
            return "[`%s`](#%s)" % (word, self.anchors[plain])
        return "`%s`" % word

    def text(self, s, own):
        out = []
        pos = 0
        for m in NAME_IN_PROSE.finditer(s):
            out.append(self.escape(s[pos:m.start()]))
            out.append(self.name(m.group(0), own))
            pos = m.end()
        out.append(self.escape(s[pos:]))
        return "".join(out)

    @staticmethod
    def escape(s):
        return s.replace("\\", "\\\\").replace("*", "\\*").replace("<", "&lt;")

    def line(self, s, own):
        parts = s.split("`")
        for k in range(0, len(parts), 2):           # outside `code` spans
            parts[k] = self.text(parts[k], own)
        out = "`".join(parts)
        if re.match(r"\s*#", out):
            out = out.replace("#", "\\#", 1)
        return out

    def block(self, lines, own=()):
        self.seen = set()
        return [self.line(x, own) if x.strip() else "" for x in lines]


def render(overview, sections):
    anchors = {}
    for sec in sections:
        for item in sec["items"]:
            if item[0] == "entry":
                for name in declared_names(item[2]):
                    anchors.setdefault(name, name)
    prose = Prose(anchors)

    over = prose.block(overview)

    ref = []
    index = []
    for sec in sections:
        entries = [(heading_of(declared_names(it[2])), declared_names(it[2])[0])
                   for it in sec["items"] if it[0] == "entry"]
        if sec["title"]:
            ref += ["", ("##" if sec["level"] == 2 else "###") + " " + sec["title"], ""]
            links = ", ".join("[`%s`](#%s)" % (heading, anchor) for heading, anchor in entries)
            index.append(("  " if sec["level"] == 3 else "") + "- [%s](#%s)%s"
                         % (sec["title"], slug(sec["title"]), ": " + links if links else ""))
        for item in sec["items"]:
            if item[0] == "prose":
                ref += prose.block(item[1]) + [""]
                continue
            _, text, decl = item
            names = declared_names(decl)
            ref += ['<a id="%s"></a>' % x for x in names   # headings' own ids are lowercase
                    if x != heading_of(names) or x != x.lower()]
            level = "####" if sec["level"] == 3 else "###"
            ref += [level + " " + heading_of(names), "", "```c"] + decl + ["```", ""]
            if text:
                ref += prose.block(text, own=names) + [""]
    while ref and not ref[0]:
        ref.pop(0)
    while ref and not ref[-1]:
        ref.pop()
    return {"overview": over, "reference": index + [""] + ref}


def regenerate(page_text, parts):
    out = page_text
    for name, body in parts.items():
        begin, end = BEGIN.format(name=name), END.format(name=name)
        pat = re.compile(re.escape(begin) + r"\n.*?" + re.escape(end), re.S)
        if not pat.search(out):
            sys.exit("gen_capi: docs/c-api.md lacks the markers of region '%s':\n  %s\n  %s"
                     % (name, begin, end))
        out = pat.sub(lambda _m: begin + "\n\n" + "\n".join(body) + "\n\n" + end, out)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="exit 1 if docs/c-api.md is not what the header produces")
    args = ap.parse_args()
    overview, sections = parse(HEADER)
    with open(PAGE, encoding="utf-8") as f:
        old = f.read()
    new = regenerate(old, render(overview, sections))
    if args.check:
        if new != old:
            diff = difflib.unified_diff(old.splitlines(), new.splitlines(),
                                        "docs/c-api.md", "generated", lineterm="", n=1)
            sys.stdout.write("\n".join(list(diff)[:40]) + "\n")
            sys.exit("gen_capi: docs/c-api.md is out of date with core/include/parataxis.h; "
                     "run python3 docs/gen_capi.py")
        return
    if new != old:
        with open(PAGE, "w", encoding="utf-8") as f:
            f.write(new)


if __name__ == "__main__":
    main()
