"""add+cancel per operation: parataxis.TimerQueue vs asyncio loop.call_later vs
threading.Timer, in one process, interleaved rounds, medians and ratios.

    python tests/bench/bench_python.py [--rounds 7] [--n 20000]

Each op arms a timer 60 s out and cancels it at once (the common case: most
timers never fire).  parataxis owes each cancelled timer its handler's one call,
fn(True), which its worker makes soon after: its timed region runs until all of
them have run (call_later's cancelled callback is never called).  threading.Timer needs a thread per timer, so it runs fewer
ops per round (n/20); the figure is per op either way.
"""
import argparse
import asyncio
import statistics
import threading
import time

import parataxis


def noop(*_):
    pass


def bench_parataxis(q, n):
    calls = []

    def handler(aborted):
        calls.append(aborted)

    add, cancel = q.add, q.cancel
    t0 = time.perf_counter()
    for _ in range(n):
        cancel(add(60.0, handler))
    while len(calls) < n:                       # the owed fn(True) calls
        time.sleep(0.0001)
    dt = (time.perf_counter() - t0) / n
    assert len(calls) == n and all(calls)       # exactly once, each aborted
    return dt


def bench_call_later(loop, n):
    call_later = loop.call_later
    t0 = time.perf_counter()
    for _ in range(n):
        call_later(60.0, noop).cancel()
    dt = (time.perf_counter() - t0) / n
    loop.run_until_complete(asyncio.sleep(0))   # let the loop drop cancelled handles
    return dt


def bench_threading_timer(n):
    t0 = time.perf_counter()
    timers = []
    for _ in range(n):
        t = threading.Timer(60.0, noop)
        t.start()
        t.cancel()
        timers.append(t)
    dt = (time.perf_counter() - t0) / n
    for t in timers:
        t.join()
    return dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--n", type=int, default=20000)
    a = ap.parse_args()
    loop = asyncio.new_event_loop()
    res = {"parataxis": [], "call_later": [], "threading.Timer": []}
    with parataxis.TimerQueue() as q:
        bench_parataxis(q, 1000)                     # warm up
        bench_call_later(loop, 1000)
        for _ in range(a.rounds):
            res["parataxis"].append(bench_parataxis(q, a.n))
            res["call_later"].append(bench_call_later(loop, a.n))
            res["threading.Timer"].append(bench_threading_timer(max(a.n // 20, 100)))
    loop.close()
    med = {k: statistics.median(v) for k, v in res.items()}
    print(f"add+cancel per op, median of {a.rounds} interleaved rounds (n={a.n})")
    for k, v in med.items():
        print(f"  {k:16s} {v * 1e9:10.0f} ns   (min {min(res[k]) * 1e9:.0f}, "
              f"max {max(res[k]) * 1e9:.0f})")
    px = med["parataxis"]
    print(f"  call_later / parataxis      = {med['call_later'] / px:6.2f}x")
    print(f"  threading.Timer / parataxis = {med['threading.Timer'] / px:6.1f}x")


if __name__ == "__main__":
    main()
