"""Seeing into a run: px.dump() lists every live fiber of the calling run --
its number and name, its state, what it waits for and who holds that, how
long it waited, and where it is (its greenlet's Python stack) -- and
px.dump_signal(signum) makes a signal print the same table for every run of
the process (the C library's px_dump, written to the C stderr).

The records come from the engine's px_sched_inspect (through _host.inspect,
which holds the GIL and keeps the collector off while the scheduler walks its
fibers); the stacks are taken afterwards, from each fiber's innermost frame.
"""
from __future__ import annotations

import os
import re
import sys
import traceback
from typing import IO, Any, Dict, List, NamedTuple, Optional, Tuple

from . import _host
from ._errors import NoFiberError, raise_for
from ._parataxis import lib

_STATES = {lib.PX_FIBER_READY: "ready", lib.PX_FIBER_RUNNING: "running",
           lib.PX_FIBER_PARKED: "parked", lib.PX_FIBER_ENDED: "ended"}
_NEVER = (1 << 63) - 1
_HERE = os.path.normcase(os.path.abspath(__file__))
_FIBERS = os.path.join(os.path.dirname(_HERE), "_fibers.py")
_STDERR = sys.stderr


class FiberInfo(NamedTuple):
    """One live fiber of a run, as px.dump() saw it.

    number:      the number reports print for it (1 for the run's first fiber)
    id:          its 64-bit id (Fiber.id)
    name:        its name, or None (Fiber.name)
    state:       'ready' (it can run), 'running' (the caller of dump) or
                 'parked' (it waits)
    reason:      what it waits for, as the engine names the wait ("Mutex lock",
                 "channel recv", "sleep", "fd wait", ...); None unless parked
    kind:        the kind of object it waits on ("mutex", "chan", "fd", ...),
                 or None
    object_name: that object's name (a primitive's `name`), or None
    holders:     the numbers of the fibers holding that object (a Mutex's
                 owner, an RwLock's holders, ...); () when none
    fd:          the file descriptor of an fd wait, else None
    events:      an fd wait's direction: "readable", "writable" or
                 "readable writable"; else None
    deadline:    when its wait ends by itself, in seconds on px.now()'s clock
                 (a sleep, a timeout or move_on_after around it); None if never
    waited:      how long it has waited, in seconds (0.0 unless parked; the
                 engine stamps a park to the millisecond)
    stack:       where it is: its Python stack, outermost call first, as a
                 traceback.StackSummary (empty before its first turn); the
                 library's own frame below its function is left out
    """

    number: int
    id: int
    name: Optional[str]
    state: str
    reason: Optional[str]
    kind: Optional[str]
    object_name: Optional[str]
    holders: Tuple[int, ...]
    fd: Optional[int]
    events: Optional[str]
    deadline: Optional[float]
    waited: float
    stack: traceback.StackSummary


def _events(mask: int) -> str:
    words = []
    if mask & lib.PX_READABLE:
        words.append("readable")
    if mask & lib.PX_WRITABLE:
        words.append("writable")
    return " ".join(words)


def _stack(frame: Any) -> traceback.StackSummary:
    # Outermost call first, without the fiber's body (Fiber._main, where every
    # fiber starts) nor dump's own frames (the caller's stack goes on above).
    if frame is None:
        return traceback.StackSummary()
    frames = [(f, line) for f, line in traceback.walk_stack(frame)
              if os.path.normcase(f.f_code.co_filename) != _HERE
              and not (f.f_code.co_name == "_main"
                       and os.path.normcase(f.f_code.co_filename) == _FIBERS)]
    frames.reverse()
    return traceback.StackSummary.extract(iter(frames), lookup_lines=False)


def _default_name(fiber: Any) -> Optional[str]:
    # A fiber's name when C has none yet: its Fiber's (the function's
    # __qualname__), None for a handler's fiber before its first turn.
    return fiber.name if fiber is not None else None


def _records() -> List[FiberInfo]:
    if _host.current() is None:
        raise NoFiberError("dump outside px.run")
    out = []
    for (fid, number, name, state, reason, kind, object_name, holders, fd, events,
         deadline, waited, frame, fiber) in _host.inspect():
        if name is None:                # named by default: C is told now, as a
            name = _default_name(fiber)     # report needs it from now on
            if name is not None:
                lib.px_fiber_set_name(fid, name.encode("utf-8", "replace"))
        out.append(FiberInfo(
            number=number, id=fid, name=name, state=_STATES.get(state, str(state)),
            reason=reason, kind=kind, object_name=object_name, holders=tuple(holders),
            fd=None if fd < 0 else fd, events=_events(events) if fd >= 0 else None,
            deadline=None if deadline == _NEVER else deadline / 1e9,
            waited=waited / 1e9, stack=_stack(frame)))
    return out


def _unnamed() -> Dict[int, str]:
    # The default names of the run's live fibers that C has no name for, by
    # number: for a deadlock report made before any dump named them.  Called
    # by run() from its root, between pulls.
    names = {}
    for rec in _host.inspect():
        if rec[2] is None:
            name = _default_name(rec[13])
            if name is not None:
                names[rec[1]] = name
    return names


# A fiber in a report: `fiber 3`, unless a quoted text (a wait's reason, an
# object's or a fiber's name) holds it, or it is named (`fiber 3 "poller"`).
_FIBER_REF = re.compile(r'"[^"\n]*"|\bfiber (\d+)(?!\d| ")')


def _name_report(report: str, names: Dict[int, str]) -> str:
    """The engine's deadlock report with the default names of the fibers C had
    none for (names, by number) after their numbers, as C prints a name."""
    def named(m: "re.Match[str]") -> str:
        n = m.group(1)
        name = names.get(int(n)) if n is not None else None
        return m.group(0) if name is None else f'fiber {n} "{name}"'
    return _FIBER_REF.sub(named, report) if names else report


def _fiber_text(number: int, name: Optional[str]) -> str:
    return f'fiber {number}' + (f' "{name}"' if name is not None else "")


def _print(records: List[FiberInfo], file: IO[str]) -> None:
    names = {r.number: r.name for r in records}
    now = lib.px_now() / 1e9
    run = _host.current()
    clock = " (virtual clock)" if getattr(run, "virtual", False) else ""
    lines = [f"parataxis: the fibers of this run{clock}:"]
    for r in records:
        line = f"  {_fiber_text(r.number, r.name)}: {r.state}"
        if r.state == "parked":
            line += f" for {r.waited:.3f} s on \"{r.reason}\""
            if r.fd is not None:
                line += f", fd {r.fd} {r.events}"
            elif r.kind is not None:
                line += f", waits on {r.kind}"
                if r.object_name is not None:
                    line += f' "{r.object_name}"'
            if r.holders:
                line += " held by " + ", ".join(_fiber_text(h, names.get(h))
                                                 for h in r.holders)
            if r.deadline is not None:
                line += f", deadline in {r.deadline - now:.3f} s"
        lines.append(line)
        if not r.stack and r.state == "ready":
            lines.append("      not started yet")
        for fs in r.stack:
            lines.append(f'      File "{fs.filename}", line {fs.lineno}, in {fs.name}')
    lines.append(f"  ({len(records)} live)")
    file.write("\n".join(lines) + "\n")
    flush = getattr(file, "flush", None)
    if flush is not None:
        flush()


def dump(file: Optional[IO[str]] = sys.stderr) -> List[FiberInfo]:
    """Lists every live fiber of the calling run, in the order they were
    spawned: returns a FiberInfo for each, and prints them as a table to
    `file` (None: prints nothing) -- number and name, state, what it waits
    for and who holds that, its deadline, how long it waited, and its
    Python stack.

    Call it from any fiber of the run (the caller is 'running').  Never
    waits.  Raises NoFiberError outside px.run.  To have a run print this
    table while you watch it, see dump_signal.
    """
    if file is _STDERR:             # the default, bound at import: today's sys.stderr
        file = sys.stderr
    records = _records()
    if file is not None:
        _print(records, file)
    return records


def dump_signal(signum: Optional[int]) -> None:
    """From now on, signal `signum` (signal.SIGUSR1, ...) makes every run of
    the process print its table of fibers -- the C library's, with each
    fiber's Python stack -- to the process's stderr (file descriptor 2):
    at once while the run waits in the kernel, after the running fiber's
    turn while fibers run.  `kill -USR1 <pid>` then shows where a stuck
    program is.  The environment variable PARATAXIS_DUMP_SIGNAL (a number or
    a name, USR1 or SIGUSR1) does the same from the start.

    0 or None puts back the handler the signal had before.  It replaces
    the signal's Python handler (signal.signal), as one signal.signal call
    later replaces it.  Any thread; never waits.  Raises InvalidArgument
    for a signal that cannot be caught (SIGKILL, SIGSTOP, out of range),
    TypeError for what is not an int.
    """
    if signum is None:
        signum = 0
    if isinstance(signum, bool) or not isinstance(signum, int):
        raise TypeError(f"dump_signal: a signal number, not {type(signum).__name__}")
    rc = lib.px_dump_signal(int(signum))
    if rc != 0:
        raise_for(rc)


__all__ = ["FiberInfo", "dump", "dump_signal"]
