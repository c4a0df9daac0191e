"""parataxis: a thread-safe timer queue (and, later, fibers) from libparataxis.

    import threading, parataxis
    done = threading.Event()
    with parataxis.TimerQueue() as q:
        q.add(0.1, lambda aborted: (print("aborted" if aborted else "fired"), done.set()))
        done.wait(5)        # leaving the block at once would abort the timer

See docs/python.md.
"""
from ._core import HandlerQueue, Timer, TimerHandle, TimerQueue, now, version
from ._errors import (BusyError, Cancelled, Closed, DeadlockError, Error, ForkedError,
                      InvalidArgument, NoFiberError, NoMemory, NotOwnerError,
                      OwnerDiedError, Timeout, WrongThreadError)

__version__ = "0.1.0"

__all__ = [
    "TimerQueue", "TimerHandle", "Timer", "HandlerQueue", "now", "version",
    "Error", "InvalidArgument", "NoMemory", "Timeout", "Cancelled", "DeadlockError",
    "NotOwnerError", "BusyError", "OwnerDiedError", "NoFiberError", "Closed",
    "ForkedError", "WrongThreadError",
]
