"""fiber_demo.py -- the fiber engine and the sync family doing their job from Python.

Run:  make demo   (or: pip install . && python docs/examples/fiber_demo.py)

Fibers are greenlets scheduled by the C scheduler: a producer and two consumers
on a channel, a mutex handed over in FIFO order, a timeout that fires at the
interrupted wait, timer handlers delivered as fibers, and a deadlock the engine
explains -- a dump of the named fibers while they wait, then the report: who
waits on whom.
"""
import sys
import time

import parataxis as px

start = time.monotonic()


def say(what: str) -> None:
    print(f"{(time.monotonic() - start) * 1e3:7.1f} ms  fiber {px.current_fiber().number}: {what}")


def pipeline() -> int:
    ch: px.Channel[int] = px.Channel(capacity=2)

    def produce() -> None:
        for i in range(5):
            ch.send(i)
        ch.close()

    def consume(name: str) -> int:
        total = 0
        for v in ch:
            say(f"{name} got {v}")
            total += v
            px.yield_()
        return total

    px.spawn(produce)
    a, b = px.spawn(consume, "left"), px.spawn(consume, "right")
    return a.join() + b.join()


def hand_off() -> None:
    m = px.Mutex()
    order: list[int] = []

    def worker(i: int) -> None:
        with m:
            order.append(i)
            px.sleep(0.001)

    for f in [px.spawn(worker, i) for i in range(1, 5)]:
        f.join()
    say(f"the mutex went to the fibers in the order they asked: {', '.join(map(str, order))}")


def timeouts_and_timers() -> None:
    try:
        with px.timeout(0.02):
            px.Event().wait()               # nobody sets it
    except px.Timeout as e:
        say(f"px.timeout(0.02) fired at the interrupted wait: {type(e).__name__}")
    with px.move_on_after(0.01) as scope:
        px.sleep(10)
    say(f"move_on_after: expired={scope.expired}, and the fiber went on")

    done = px.WaitGroup()
    m = px.Mutex()

    def handler(aborted: bool) -> None:   # runs as a fiber of this run
        with m:
            say(f"timer handler {'aborted' if aborted else 'fired'} in a fiber")
        done.done()

    with px.TimerQueue(executor=px.scheduler()) as q:
        for delay in (0.03, 0.01):
            done.add()
            q.add(delay, handler)
        done.wait()


def main() -> None:
    say(f"pipeline total = {pipeline()}")
    hand_off()
    timeouts_and_timers()


def deadlock() -> None:
    a, b = px.Mutex(name="account a"), px.Mutex(name="account b")

    def one() -> None:
        with a:
            px.yield_()
            with b:
                pass

    def other() -> None:
        with b:
            px.yield_()
            with a:
                pass

    x, y = px.spawn(one, name="transfer a->b"), px.spawn(other, name="transfer b->a")
    px.yield_()   # each takes its first mutex
    px.yield_()   # and parks on its second
    print("px.dump() while they wait:")
    px.dump(file=sys.stdout)
    x.join()
    y.join()


if __name__ == "__main__":
    px.run(main)
    try:
        px.run(deadlock)
    except px.DeadlockError as e:
        print("px.run raised DeadlockError; the engine's report:")
        print("\n".join("    " + line for line in str(e).splitlines()))
