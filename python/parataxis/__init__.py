"""parataxis: the timer queue of libparataxis for Python (its fibers are not bound yet).

TimerQueue arms one-shot and periodic timers served by one C worker thread,
Timer groups waiters behind one expiry, HandlerQueue runs handlers on your own
thread; every handler runs exactly once, as fn(aborted).

    import threading, parataxis
    done = threading.Event()
    with parataxis.TimerQueue() as q:
        q.add(0.1, lambda aborted: (print("aborted" if aborted else "fired"), done.set()))
        done.wait(5)        # leaving the block at once would abort the timer

See docs/python.md.
"""
from ._core import HandlerQueue, Timer, TimerHandle, TimerQueue, now, version
from ._errors import Closed, Error, ForkedError, InvalidArgument, NoMemory

__version__ = "0.1.0"

__all__ = [
    "TimerQueue", "TimerHandle", "Timer", "HandlerQueue", "now", "version",
    "Error", "InvalidArgument", "NoMemory", "Closed", "ForkedError",
]
