"""One hot path of the Python binding, N times, for tests/bench/prof_binding.sh:
    python prof_python.py CASE N
spawn (+ join), yield, timeout (a with-block that does not fire), mutex (a
hand-off between two fibers), chan (an unbuffered send and recv), sched_post
(Scheduler.post from a fiber), addcancel (TimerQueue add + cancel, the worker
delivering the aborted call), handlerqueue (the same into a HandlerQueue,
drained every 256)."""
import sys

import parataxis as px

what, n = sys.argv[1], int(sys.argv[2])


def f(i):
    return i


def nop(aborted):
    pass


def fibers():
    if what == "spawn":
        for i in range(n):
            px.spawn(f, i).join()
    elif what == "yield":
        for _ in range(n):
            px.yield_()
    elif what == "timeout":
        for _ in range(n):
            with px.timeout(10):
                pass
    elif what == "mutex":
        m = px.Mutex()

        def other():
            for _ in range(n):
                with m:
                    px.yield_()
        g = px.spawn(other)
        for _ in range(n):
            with m:
                px.yield_()
        g.join()
    elif what == "chan":
        ch = px.Channel()

        def produce():
            for i in range(n):
                ch.send(i)
        g = px.spawn(produce)
        for _ in range(n):
            ch.recv()
        g.join()
    elif what == "sched_post":
        s, done = px.scheduler(), [0]

        def cb():
            done[0] += 1
        for _ in range(n):
            s.post(cb)
        while done[0] < n:
            px.yield_()


def handlerqueue():
    ran = [0]

    def h(aborted):
        ran[0] += 1

    def settle(k):
        while ran[0] < k:
            hq.wait(1)
            hq.drain()
    hq = px.HandlerQueue()
    q = px.TimerQueue(hq)
    for i in range(n):
        q.add(100, h).cancel()
        if i % 256 == 255:
            settle(i + 1)
    settle(n)
    q.close()
    hq.close()


if what == "addcancel":
    with px.TimerQueue() as q:
        for _ in range(n):
            q.add(100, nop).cancel()
elif what == "handlerqueue":
    handlerqueue()
else:
    px.run(fibers)
