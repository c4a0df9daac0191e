"""timer_demo.py -- the timer queue doing its job from Python.

Run:  make demo   (or: pip install . && python docs/examples/timer_demo.py)

Three one-shot timers, one cancelled; a periodic timer cancelled after three
ticks; a deadline timer with two waiters; and handlers sent to an asyncio loop.
Every handler is called exactly once (a periodic one once per tick, then once
with aborted=True).
"""
import asyncio
import threading
import time
from typing import Callable

import parataxis

start = time.monotonic()
# Lines come from two threads (this one and the worker): one at a time.
out_lock = threading.RLock()


def out(text: str) -> None:
    with out_lock:
        print(f"{(time.monotonic() - start) * 1e3:7.1f} ms  {text}")


def say(what: str) -> Callable[[bool], None]:
    def handler(aborted: bool) -> None:
        out(f"{what:28s} {'aborted' if aborted else 'expired'}")
        done.release()
    return handler


done = threading.Semaphore(0)


def worker_thread_demo() -> None:
    three_ticks = threading.Event()
    ticks = 0

    def tick(aborted: bool) -> None:
        nonlocal ticks
        if aborted:
            say("periodic, final call")(aborted)
        else:
            ticks += 1
            out(f"periodic, tick {ticks}")
            if ticks == 3:
                three_ticks.set()

    with parataxis.TimerQueue() as q:
        q.add(0.030, say("one-shot, 30 ms"))
        q.add(0.010, say("one-shot, 10 ms"))
        doomed = q.add(0.020, say("one-shot, 20 ms, cancelled"))
        with out_lock:                        # the aborted call's line waits for this one
            out(f"cancel the 20 ms timer: {q.cancel(doomed)}")
        pid = q.add_periodic(0.005, 0.015, tick)
        t = parataxis.Timer(q)
        t.expires_after(0.040)
        t.async_wait(say("deadline timer, waiter A"))
        t.async_wait(say("deadline timer, waiter B"))
        three_ticks.wait(5)
        q.cancel(pid)                         # its final call follows
        for _ in range(6):                    # 10, 30, cancelled, final, A, B
            done.acquire(timeout=5)


async def asyncio_demo() -> None:
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[None] = loop.create_future()

    def on_loop(aborted: bool) -> None:
        out(f"handler on the asyncio loop, same thread: {threading.get_ident() == main_thread}")
        fut.set_result(None)

    with parataxis.TimerQueue(executor=loop) as q:
        q.add(0.010, on_loop)
        await asyncio.wait_for(fut, 5)


main_thread = threading.get_ident()
print(f"parataxis {parataxis.version()} from Python")
worker_thread_demo()
asyncio.run(asyncio_demo())
out("every handler ran exactly once; done")
