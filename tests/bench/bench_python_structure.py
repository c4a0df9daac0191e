"""Task groups in Python beside asyncio, uvloop, trio and gevent, in one
process: interleaved rounds, the median of each cell, and each peer's ratio to
parataxis.

    python tests/bench/bench_python_structure.py [--rounds 7] [--members 1000]
                                                 [--groups 20]

One op is one member of a group of `--members` fibers that each run an empty
function: the group opened, every member spawned, the group left (which waits
for all of them), divided by the number of members.  px.group() with
g.spawn(f); asyncio.TaskGroup with create_task(f()) (under asyncio's own loop
and under uvloop's); a trio nursery with start_soon(f); a gevent.pool.Group
with spawn(f) and join().  The "px spawn loop" row is the same fibers spawned
with px.spawn and joined one by one: what a group replaces.

Every cell runs inside its library's loop and times itself there, so starting
and closing a loop is not in any figure.  The order of the libraries rotates
from round to round.  Ratios are peer / parataxis: above 1 means parataxis is
faster.  A peer that is not installed is skipped with a note.
"""
import argparse
import asyncio
import statistics
import sys
import time


def px_cell(members, groups):
    import parataxis as px

    def nothing():
        pass

    def main():
        t0 = time.perf_counter()
        for _ in range(groups):
            with px.group() as g:
                spawn = g.spawn
                for _ in range(members):
                    spawn(nothing)
        return (time.perf_counter() - t0) / (groups * members)

    return px.run(main)


def px_loop_cell(members, groups):
    import parataxis as px

    def nothing():
        pass

    def main():
        spawn = px.spawn
        t0 = time.perf_counter()
        for _ in range(groups):
            fibers = [spawn(nothing) for _ in range(members)]
            for f in fibers:
                f.join()
        return (time.perf_counter() - t0) / (groups * members)

    return px.run(main)


async def _asyncio_main(members, groups):
    async def nothing():
        pass

    t0 = time.perf_counter()
    for _ in range(groups):
        async with asyncio.TaskGroup() as tg:
            create = tg.create_task
            for _ in range(members):
                create(nothing())
    return (time.perf_counter() - t0) / (groups * members)


def asyncio_cell(members, groups):
    return asyncio.run(_asyncio_main(members, groups))


def uvloop_cell(members, groups):
    import uvloop

    loop = uvloop.new_event_loop()
    try:
        return loop.run_until_complete(_asyncio_main(members, groups))
    finally:
        loop.close()


def trio_cell(members, groups):
    import trio

    async def nothing():
        pass

    async def main():
        t0 = time.perf_counter()
        for _ in range(groups):
            async with trio.open_nursery() as n:
                start = n.start_soon
                for _ in range(members):
                    start(nothing)
        return (time.perf_counter() - t0) / (groups * members)

    return trio.run(main)


def gevent_cell(members, groups):
    import gevent
    import gevent.pool

    def nothing():
        pass

    def main():
        t0 = time.perf_counter()
        for _ in range(groups):
            g = gevent.pool.Group()
            spawn = g.spawn
            for _ in range(members):
                spawn(nothing)
            g.join(raise_error=True)
        return (time.perf_counter() - t0) / (groups * members)

    return gevent.spawn(main).get()


CELLS = [
    ("parataxis group", "parataxis", px_cell),
    ("px spawn loop", "parataxis", px_loop_cell),
    ("asyncio TaskGroup", None, asyncio_cell),
    ("uvloop TaskGroup", "uvloop", uvloop_cell),
    ("trio nursery", "trio", trio_cell),
    ("gevent pool.Group", "gevent", gevent_cell),
]


def available(module):
    if module is None:
        return True
    try:
        __import__(module)
        return True
    except ImportError:
        return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--members", type=int, default=1000)
    ap.add_argument("--groups", type=int, default=20)
    a = ap.parse_args()
    if sys.version_info < (3, 11):
        CELLS[:] = [c for c in CELLS if "TaskGroup" not in c[0]]
        print("(Python < 3.11: no asyncio.TaskGroup rows)")
    cells = []
    for name, module, fn in CELLS:
        if available(module):
            cells.append((name, fn))
        else:
            print(f"({name}: {module} not installed, skipped)")
    figures = {name: [] for name, _ in cells}
    for r in range(a.rounds):
        k = r % len(cells)
        for name, fn in cells[k:] + cells[:k]:
            figures[name].append(fn(a.members, a.groups))
    print(f"== task groups of {a.members} empty members, per member, "
          f"median of {a.rounds} rounds ({a.groups} groups each)")
    ours = statistics.median(figures["parataxis group"]) if "parataxis group" in figures else None
    for name, _ in cells:
        m = statistics.median(figures[name])
        ratio = f"   ratio {m / ours:.2f}" if ours else ""
        print(f"{name:20s} {m * 1e9:8.0f} ns{ratio}")


if __name__ == "__main__":
    main()
