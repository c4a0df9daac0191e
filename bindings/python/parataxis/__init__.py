"""parataxis: timers, fibers and the sync family of libparataxis for Python.

TimerQueue arms one-shot and periodic timers served by one C worker thread
(every handler runs exactly once, as fn(aborted)); Timer groups waiters behind
one expiry; HandlerQueue runs handlers on your own thread.

run(main) runs fibers -- greenlets scheduled by the C scheduler -- with sleep,
yield_, timeout / move_on_after / cancel_scope, and Mutex, RwLock, WaitGroup,
Barrier, Once, Semaphore, Event and Channel, whose waits all obey the scopes:

    import parataxis as px

    def main():
        ch = px.Channel()
        px.spawn(lambda: [ch.send(i) for i in range(3)] and ch.close())
        return [v for v in ch]

    assert px.run(main) == [0, 1, 2]

See docs/python.md.
"""
from ._core import HandlerQueue, Timer, TimerHandle, TimerQueue, now, version
from ._errors import (BusyError, Cancelled, Closed, DeadlockError, Error, ForkedError,
                      InvalidArgument, NoFiberError, NoMemory, NotOwnerError,
                      OwnerDiedError, Timeout, WrongSchedulerError)
from ._fibers import (CancellationToken, Fiber, Scheduler, cancel_scope, current_id,
                      move_on_after, run, scheduler, sleep, spawn, timeout, yield_)
from ._sync import Barrier, Channel, Event, Mutex, Once, RwLock, Semaphore, WaitGroup
from ._tls import SSLSocket, wrap_socket

__version__ = "0.1.0"

__all__ = [
    "TimerQueue", "TimerHandle", "Timer", "HandlerQueue", "now", "version",
    "run", "spawn", "Fiber", "sleep", "yield_", "current_id", "scheduler", "Scheduler",
    "timeout", "move_on_after", "CancellationToken", "cancel_scope",
    "Mutex", "RwLock", "WaitGroup", "Barrier", "Once", "Semaphore", "Event", "Channel",
    "wrap_socket", "SSLSocket",
    "Error", "InvalidArgument", "NoMemory", "Closed", "ForkedError", "Timeout",
    "Cancelled", "DeadlockError", "OwnerDiedError", "NotOwnerError", "NoFiberError",
    "BusyError", "WrongSchedulerError",
]
