"""Sleeps on a virtual clock: parataxis's px.VirtualClock beside trio's
MockClock(autojump_threshold=0), the test clock of the library that has one.
Each round runs FIBERS fibers that each sleep an hour SLEEPS times, and
reports the real time per sleep; medians of --rounds interleaved rounds.

    .venv/bin/python tests/bench/bench_python_clock.py [--rounds 5]
"""
import argparse
import statistics
import time

import parataxis as px

FIBERS, SLEEPS, HOUR = 100, 100, 3600.0


def px_round() -> float:
    def sleeper() -> None:
        for _ in range(SLEEPS):
            px.sleep(HOUR)

    def main() -> None:
        fibers = [px.spawn(sleeper) for _ in range(FIBERS)]
        for f in fibers:
            f.join()

    t0 = time.perf_counter()
    px.run(main, clock=px.VirtualClock())
    return time.perf_counter() - t0


def trio_round() -> float:
    import trio
    import trio.testing

    async def sleeper() -> None:
        for _ in range(SLEEPS):
            await trio.sleep(HOUR)

    async def main() -> None:
        async with trio.open_nursery() as n:
            for _ in range(FIBERS):
                n.start_soon(sleeper)

    t0 = time.perf_counter()
    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    rounds = ap.parse_args().rounds
    rows = {"px.VirtualClock": [], "trio MockClock(autojump_threshold=0)": []}
    for _ in range(rounds):
        rows["px.VirtualClock"].append(px_round())
        rows["trio MockClock(autojump_threshold=0)"].append(trio_round())
    n = FIBERS * SLEEPS
    base = statistics.median(rows["trio MockClock(autojump_threshold=0)"])
    print(f"{n:,} one-hour sleeps ({FIBERS} fibers x {SLEEPS}), median of {rounds} rounds:")
    for name, times in rows.items():
        med = statistics.median(times)
        print(f"  {name:<40} {med * 1e3:8.1f} ms  {med / n * 1e9:8.0f} ns a sleep"
              f"  {med / base:5.2f}x trio")


if __name__ == "__main__":
    main()
