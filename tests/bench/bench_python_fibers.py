"""Python fibers beside raw greenlet, gevent, asyncio and trio, in one process:
interleaved rounds, the median of each cell, and each peer's ratio to parataxis.

    python tests/bench/bench_python_fibers.py [--rounds 7] [--n 20000]
                                              [--parked 100000] [--mem-rounds 3]

What one op is, row by row (the same for every library, so that a row compares):

  yield round trip   two fibers, each yielding once: A yields and B runs, B yields
                     and A runs -- the two switches of a raw greenlet round trip
                     (main -> g -> main), which is the greenlet cell.  Two fibers
                     each yield n times; op = elapsed / n (the span includes
                     starting and joining the two).  gevent.sleep(0),
                     asyncio.sleep(0), trio.lowlevel.checkpoint(), px.yield_().
  spawn + join       start a fiber running an empty function and wait until it
                     ended (its result fetched where the API has one), one at a
                     time.  gevent.spawn(f).join(), await asyncio.create_task(f()),
                     px.spawn(f).join(); trio joins only through a nursery, so
                     its op opens a nursery, start_soon(f) and closes it.  The
                     greenlet cell, greenlet(f).switch(), is the floor: creation
                     and a run to the end, nothing to join.
  mutex hand-off     two fibers taking turns on one lock; op = one hand-off, the
                     lock passing from one fiber to the other, which was waiting
                     (counted afterwards from a log of owners; elapsed / the
                     number of owner changes, so a lock that lets the unlocker
                     take it back gets no credit for it).  The main fiber holds
                     the lock until both wait on it.  px.Mutex, asyncio.Lock and
                     trio.Lock hand the lock to the waiter; gevent.lock.Semaphore
                     lets the releaser take it back at once (one hand-off in
                     40,000 was seen), so its turns need gevent.sleep(0) after
                     each release -- what a gevent user must write for turns.
  channel ping-pong  one value there and back between two fibers over two
                     unbuffered channels: A sends on ping, B receives and sends
                     it back on pong, A receives (two send/recv pairs).
                     px.Channel(0), gevent.queue.Channel(), trio memory channel
                     (0); asyncio has no unbuffered queue: asyncio.Queue(maxsize=1)
                     (the round trip makes both sides wait all the same).
  bytes per parked   RSS growth per fiber while N (100,000) fibers are parked on
  fiber              an event, each in a fresh subprocess (one per library and
                     round, so that no library runs in memory another freed):
                     resident pages of /proc/self/statm times the page size,
                     read after gc.collect() before spawning and again once all
                     N have parked; the list of fiber handles is counted too.
                     RSS, not tracemalloc: tracemalloc sees only Python's
                     allocators, not the frame data-stack chunk CPython maps
                     for each greenlet (one mmap each) nor the C engine's
                     malloc'd records.  The greenlet cell is a greenlet
                     suspended in its function (switched back to main).

Every cell runs inside its library's loop (px.run, asyncio.run, trio.run, the
gevent hub) and times itself there, so starting and closing a loop is not in
any figure.  Hot calls are bound to locals in every library alike.  The order
of the libraries rotates from round to round.  Ratios are peer / parataxis:
above 1 means parataxis is faster (or smaller).  The parataxis cells are
skipped, with a note, while parataxis has no fiber API (no parataxis.run); a
peer that is not installed is skipped with a note.
"""
import argparse
import asyncio
import gc
import operator
import os
import platform
import statistics
import subprocess
import sys
import time

try:
    import greenlet
except ImportError:
    greenlet = None
try:
    import gevent
    import gevent.event
    import gevent.lock
    import gevent.queue
except ImportError:
    gevent = None
try:
    import trio
    import trio.testing
except ImportError:
    trio = None
try:
    import parataxis as px
except ImportError:
    px = None

now = time.perf_counter_ns


def noop():
    pass


async def anoop():
    pass


def handoffs(log):
    """How many times the lock passed to the other fiber."""
    return sum(a != b for a, b in zip(log, log[1:]))


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


# What parataxis and gevent do alike (both spawn a handle that joins, both block
# in plain calls): one body each, given the library's calls already bound.

def spawn_join(n, spawn):
    t0 = now()
    for _ in range(n):
        spawn(noop).join()
    return (now() - t0) / n


def pingpong(n, spawn, ping_send, ping_recv, pong_send, pong_recv):
    def echo():
        for _ in range(n):
            pong_send(ping_recv())
    t0 = now()
    f = spawn(echo)
    for i in range(n):
        ping_send(i)
        pong_recv()
    f.join()
    return (now() - t0) / n


def parked_bytes(n, ev, spawn, yield_):
    """Bytes per fiber parked on ev (spawned, run until all wait, then woken)."""
    parked = [0]

    def wait():
        parked[0] += 1
        ev.wait()
    gc.collect()
    before = rss()
    fs = [spawn(wait) for _ in range(n)]
    while parked[0] < n:
        yield_()
    per = (rss() - before) / n
    ev.set()
    for f in fs:
        f.join()
    return per


# -- raw greenlet --------------------------------------------------------------

def greenlet_switch(n):
    main = greenlet.getcurrent()

    def echo():
        back = main.switch
        for _ in range(n):
            back()
    switch = greenlet.greenlet(echo).switch
    t0 = now()
    for _ in range(n):
        switch()                       # main -> echo -> main
    dt = now() - t0
    switch()                           # echo ends
    return dt / n


def greenlet_spawn(n):
    g = greenlet.greenlet
    t0 = now()
    for _ in range(n):
        g(noop).switch()
    return (now() - t0) / n


def greenlet_park(n):
    main = greenlet.getcurrent()

    def wait():
        main.switch()
    gc.collect()
    before = rss()
    gs = [greenlet.greenlet(wait) for _ in range(n)]
    for g in gs:
        g.switch()                     # runs, switches back: suspended
    per = (rss() - before) / n
    for g in gs:
        g.switch()
    return per


# -- parataxis (the API of issue 11) -------------------------------------------

def px_yield(n):
    def yielder():
        y = px.yield_
        for _ in range(n):
            y()
    t0 = now()
    a, b = px.spawn(yielder), px.spawn(yielder)
    a.join()
    b.join()
    return (now() - t0) / n


def px_spawn(n):
    return spawn_join(n, px.spawn)


def px_handoff(n):
    m, log = px.Mutex(), []

    def taker(me):
        lock, unlock, note = m.lock, m.unlock, log.append
        for _ in range(n):
            lock()
            note(me)
            unlock()
    m.lock()
    a, b = px.spawn(taker, 0), px.spawn(taker, 1)
    px.yield_()                        # both wait on m
    t0 = now()
    m.unlock()
    a.join()
    b.join()
    return (now() - t0) / handoffs(log)


def px_pingpong(n):
    ping, pong = px.Channel(0), px.Channel(0)
    return pingpong(n, px.spawn, ping.send, ping.recv, pong.send, pong.recv)


def px_park(n):
    return parked_bytes(n, px.Event(), px.spawn, px.yield_)


# -- gevent --------------------------------------------------------------------

def gevent_yield(n):
    def yielder():
        sleep = gevent.sleep
        for _ in range(n):
            sleep(0)
    t0 = now()
    gevent.joinall([gevent.spawn(yielder), gevent.spawn(yielder)])
    return (now() - t0) / n


def gevent_spawn(n):
    return spawn_join(n, gevent.spawn)


def gevent_handoff(n):
    s, log = gevent.lock.Semaphore(), []

    def taker(me):
        acquire, release, note, sleep = s.acquire, s.release, log.append, gevent.sleep
        for _ in range(n):
            acquire()
            note(me)
            release()
            sleep(0)                   # else this greenlet takes it back
    s.acquire()
    gs = [gevent.spawn(taker, 0), gevent.spawn(taker, 1)]
    gevent.sleep(0)
    t0 = now()
    s.release()
    gevent.joinall(gs)
    return (now() - t0) / handoffs(log)


def gevent_pingpong(n):
    ping, pong = gevent.queue.Channel(), gevent.queue.Channel()
    return pingpong(n, gevent.spawn, ping.put, ping.get, pong.put, pong.get)


def gevent_park(n):
    return parked_bytes(n, gevent.event.Event(), gevent.spawn, lambda: gevent.sleep(0))


# -- asyncio -------------------------------------------------------------------

def async_taker(n, lk, log):
    """The fiber body of both async handoffs: n times takes lk, notes me, gives it back."""
    async def taker(me):
        acquire, release, note = lk.acquire, lk.release, log.append
        for _ in range(n):
            await acquire()
            note(me)
            release()
    return taker


def async_parker(ev):
    """The fiber body of both async park rows, and the count of those waiting on ev."""
    parked = [0]

    async def wait():
        parked[0] += 1
        await ev.wait()
    return wait, parked


async def asyncio_yield(n):
    async def yielder():
        sleep = asyncio.sleep
        for _ in range(n):
            await sleep(0)
    t0 = now()
    a, b = asyncio.create_task(yielder()), asyncio.create_task(yielder())
    await a
    await b
    return (now() - t0) / n


async def asyncio_spawn(n):
    create_task = asyncio.create_task
    t0 = now()
    for _ in range(n):
        await create_task(anoop())
    return (now() - t0) / n


async def asyncio_handoff(n):
    lk, log = asyncio.Lock(), []
    taker = async_taker(n, lk, log)
    await lk.acquire()
    a, b = asyncio.create_task(taker(0)), asyncio.create_task(taker(1))
    await asyncio.sleep(0)             # both wait on lk
    t0 = now()
    lk.release()
    await a
    await b
    return (now() - t0) / handoffs(log)


async def asyncio_pingpong(n):
    ping, pong = asyncio.Queue(maxsize=1), asyncio.Queue(maxsize=1)

    async def echo():
        get, put = ping.get, pong.put
        for _ in range(n):
            await put(await get())
    t0 = now()
    t = asyncio.create_task(echo())
    put, get = ping.put, pong.get
    for i in range(n):
        await put(i)
        await get()
    await t
    return (now() - t0) / n


async def asyncio_park(n):
    ev = asyncio.Event()
    wait, parked = async_parker(ev)
    gc.collect()
    before = rss()
    ts = [asyncio.create_task(wait()) for _ in range(n)]
    while parked[0] < n:
        await asyncio.sleep(0)
    per = (rss() - before) / n
    ev.set()
    await asyncio.gather(*ts)
    return per


# -- trio ----------------------------------------------------------------------

async def trio_yield(n):
    async def yielder():
        checkpoint = trio.lowlevel.checkpoint
        for _ in range(n):
            await checkpoint()
    t0 = now()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(yielder)
        nursery.start_soon(yielder)
    return (now() - t0) / n


async def trio_spawn(n):
    open_nursery = trio.open_nursery
    t0 = now()
    for _ in range(n):
        async with open_nursery() as nursery:
            nursery.start_soon(anoop)
    return (now() - t0) / n


async def trio_handoff(n):
    lk, log = trio.Lock(), []
    taker = async_taker(n, lk, log)
    await lk.acquire()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(taker, 0)
        nursery.start_soon(taker, 1)
        await trio.testing.wait_all_tasks_blocked()     # both wait on lk
        t0 = now()
        lk.release()
    return (now() - t0) / handoffs(log)


async def trio_pingpong(n):
    ping_tx, ping_rx = trio.open_memory_channel(0)
    pong_tx, pong_rx = trio.open_memory_channel(0)

    async def echo():
        get, put = ping_rx.receive, pong_tx.send
        for _ in range(n):
            await put(await get())
    t0 = now()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(echo)
        put, get = ping_tx.send, pong_rx.receive
        for i in range(n):
            await put(i)
            await get()
    return (now() - t0) / n


async def trio_park(n):
    ev = trio.Event()
    wait, parked = async_parker(ev)
    async with trio.open_nursery() as nursery:
        gc.collect()
        before = rss()
        for _ in range(n):
            nursery.start_soon(wait)
        while parked[0] < n:
            await trio.lowlevel.checkpoint()
        per = (rss() - before) / n
        ev.set()
    return per


# -- the table -----------------------------------------------------------------

def _px_missing():
    if px is None:
        return "parataxis is not installed"
    if not hasattr(px, "run"):
        return f"parataxis.run does not exist yet ({px.__file__} has no fiber API)"
    return None


def _version(mod):
    return getattr(mod, "__version__", "?")


# name: (how a cell runs inside the library's loop, why it is skipped or None)
LIBS = {
    "parataxis": (lambda f, n: px.run(f, n), _px_missing()),
    "greenlet": (lambda f, n: f(n), None if greenlet else "greenlet is not installed"),
    "gevent": (lambda f, n: f(n), None if gevent else "gevent is not installed"),
    "asyncio": (lambda f, n: asyncio.run(f(n)), None),
    "trio": (lambda f, n: trio.run(f, n), None if trio else "trio is not installed"),
}

TIMED = [   # (row, {library: cell}), ns per op
    ("yield round trip", {"parataxis": px_yield, "greenlet": greenlet_switch,
                          "gevent": gevent_yield, "asyncio": asyncio_yield, "trio": trio_yield}),
    ("spawn + join", {"parataxis": px_spawn, "greenlet": greenlet_spawn,
                      "gevent": gevent_spawn, "asyncio": asyncio_spawn, "trio": trio_spawn}),
    ("mutex hand-off", {"parataxis": px_handoff, "gevent": gevent_handoff,
                        "asyncio": asyncio_handoff, "trio": trio_handoff}),
    ("channel ping-pong", {"parataxis": px_pingpong, "gevent": gevent_pingpong,
                           "asyncio": asyncio_pingpong, "trio": trio_pingpong}),
]
PARKED_ROW = "bytes per parked fiber"
PARKED = {"parataxis": px_park, "greenlet": greenlet_park, "gevent": gevent_park,
          "asyncio": asyncio_park, "trio": trio_park}


def run_cell(lib, cell, n):
    gc.collect()
    return LIBS[lib][0](cell, n)


def run_parked(lib, n):
    """Bytes per parked fiber, from a fresh interpreter."""
    p = subprocess.run([sys.executable, __file__, "--park", lib, "--parked", str(n)],
                       capture_output=True, text=True)
    if p.returncode:
        last = (p.stderr.strip().splitlines() or [f"exit status {p.returncode}"])[-1]
        raise RuntimeError(f"in the subprocess: {last}")
    return float(p.stdout)


def available(cells):
    return [lib for lib in cells if LIBS[lib][1] is None]


def rotate(libs, r):
    k = r % len(libs)
    return libs[k:] + libs[:k]


def measure(a):
    """{row: {library: [one figure per round]}}, the rounds interleaved, and
    {(row, library): error} for the cells that raised (skipped from then on)."""
    res = {row: {lib: [] for lib in available(cells)} for row, cells in TIMED}
    res[PARKED_ROW] = {lib: [] for lib in available(PARKED)}
    failed = {}

    def take(row, lib, fn, *args, keep=True):
        if (row, lib) in failed:
            return
        try:
            v = fn(*args)
        except Exception as e:
            failed[row, lib] = f"{type(e).__name__}: {e}"
            return
        if keep:
            res[row][lib].append(v)
    for row, cells in TIMED:
        for lib in available(cells):
            take(row, lib, run_cell, lib, cells[lib], max(a.n // 10, 100), keep=False)
    for r in range(max(a.rounds, a.mem_rounds)):
        for row, cells in TIMED:
            for lib in rotate(available(cells), r) if r < a.rounds else []:
                take(row, lib, run_cell, lib, cells[lib], a.n)
        for lib in rotate(available(PARKED), r) if r < a.mem_rounds else []:
            take(PARKED_ROW, lib, run_parked, lib, a.parked)
    res = {row: {lib: v for lib, v in cells.items() if v} for row, cells in res.items()}
    return res, failed


def report(a, res, failed):
    print(f"Python fibers side by side: CPython {platform.python_version()}, "
          f"greenlet {_version(greenlet)}, gevent {_version(gevent)}, trio {_version(trio)}")
    print(f"medians of {a.rounds} interleaved rounds of n = {a.n} ops a cell; memory: "
          f"{a.parked:,} parked, median of {a.mem_rounds} fresh processes, RSS (/proc/self/statm)")
    for lib, (_, why) in LIBS.items():
        if why:
            print(f"  skipped: {lib}: {why}")
    for (row, lib), why in failed.items():
        print(f"  FAILED: {row}, {lib}: {why}")
    med = {row: {lib: statistics.median(v) for lib, v in cells.items()}
           for row, cells in res.items()}
    for row, cells in res.items():
        unit = "B" if row == PARKED_ROW else "ns/op"
        base = med[row].get("parataxis")
        print(f"  {row:24s} {unit:>9s} {'min..max':>17s}  {'/ parataxis' if base else ''}")
        for lib, v in cells.items():
            spread = f"{min(v):.0f}..{max(v):.0f}"
            ratio = f"{med[row][lib] / base:10.2f}x" if base else ""
            print(f"    {lib:22s} {med[row][lib]:9.0f} {spread:>17s}  {ratio}")
    return med


# The targets of issue 11: (what, row, numerator, denominator, test, bound).
TARGETS = [
    ("yield round trip <= 1.5x raw greenlet round trip", "yield round trip",
     "parataxis", "greenlet", operator.le, 1.5),
    ("spawn + join faster than gevent", "spawn + join", "gevent", "parataxis", operator.gt, 1),
    ("mutex hand-off faster than gevent", "mutex hand-off", "gevent", "parataxis", operator.gt, 1),
    ("unbuffered channel faster than gevent", "channel ping-pong",
     "gevent", "parataxis", operator.gt, 1),
    (">= 4x faster than asyncio sleep(0)", "yield round trip",
     "asyncio", "parataxis", operator.ge, 4),
]


def summary(med):
    print("  targets (issue 11)")
    for what, row, num, den, test, bound in TARGETS:
        cells = med[row]
        if num in cells and den in cells:
            q = cells[num] / cells[den]
            verdict = f"{num} / {den} = {q:.2f}  {'PASS' if test(q, bound) else 'MISS'}"
        else:
            verdict = f"SKIP (no {num if num not in cells else den} figure)"
        print(f"py target  {what:50s} {verdict}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--parked", type=int, default=100000)
    ap.add_argument("--mem-rounds", type=int, default=3)
    ap.add_argument("--park", choices=PARKED, help=argparse.SUPPRESS)   # the subprocess
    a = ap.parse_args()
    if a.park:
        print(run_cell(a.park, PARKED[a.park], a.parked))
        return
    res, failed = measure(a)
    summary(report(a, res, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
