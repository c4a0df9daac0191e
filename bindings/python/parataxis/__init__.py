"""parataxis: timers, fibers and the sync family of libparataxis for Python.

TimerQueue arms one-shot and periodic timers served by one C worker thread
(every handler runs exactly once, as fn(aborted)); Timer groups waiters behind
one expiry; HandlerQueue runs handlers on your own thread.

run(main) runs fibers -- greenlets scheduled by the C scheduler -- with sleep,
yield_, timeout / move_on_after / cancel_scope, and Mutex, RwLock, WaitGroup,
Barrier, Once, Semaphore, Event and Channel, whose waits all obey the scopes;
and I/O that parks only the calling fiber: socket, create_connection,
create_server, wrap_socket (TLS), open_tcp_stream / serve_tcp streams, wait_readable /
wait_writable, run_blocking and getaddrinfo on the C blocking pool:

    import parataxis as px

    def main():
        ch = px.Channel()
        px.spawn(lambda: [ch.send(i) for i in range(3)] and ch.close())
        return [v for v in ch]

    assert px.run(main) == [0, 1, 2]

Seeing into a run: fibers and objects have names (spawn(fn, name=...),
Mutex(name=...)), dump() lists every fiber with what it waits for and where
it is, dump_signal(signal.SIGUSR1) prints that on a signal, and
run(main, clock=VirtualClock()) runs on a clock that jumps over sleeps.

Structured concurrency: task groups (with px.group() as g: g.spawn(fn, ...)),
select over channels, events, semaphores, fds and deadlines, Future with
wait_all and wait_any, and map.

See docs/python.md.
"""
from ._core import HandlerQueue, Timer, TimerHandle, TimerQueue, now, version
from ._errors import (BusyError, Cancelled, Closed, ClosedResourceError, DeadlockError, Error,
                      ForkedError, InvalidArgument, NoFiberError, NoMemory, NotOwnerError,
                      NotSupportedError, OwnerDiedError, Timeout, WrongSchedulerError)
from ._fibers import (CancellationToken, Fiber, Scheduler, VirtualClock, cancel_scope,
                      current_fiber, current_id, move_on_after, run, scheduler, sleep, spawn,
                      timeout, yield_)
from ._dump import FiberInfo, dump, dump_signal
from ._net import (blocking_cancelled, create_connection, create_server, getaddrinfo,
                   notify_closing, run_blocking, socket, wait_readable, wait_writable)
from ._streams import SocketStream, open_tcp_stream, serve_tcp
from ._structured import Future, Group, group, map, wait_all, wait_any
from ._sync import (Barrier, Channel, Event, Mutex, Once, RwLock, SelectCase, Semaphore,
                    WaitGroup, deadline_case, readable_case, select, writable_case)
from ._tls import SSLSocket, wrap_socket

__version__ = "0.1.0"

__all__ = [
    "TimerQueue", "TimerHandle", "Timer", "HandlerQueue", "now", "version",
    "run", "spawn", "Fiber", "sleep", "yield_", "current_id", "current_fiber", "scheduler",
    "Scheduler", "VirtualClock", "dump", "dump_signal", "FiberInfo",
    "timeout", "move_on_after", "CancellationToken", "cancel_scope",
    "Mutex", "RwLock", "WaitGroup", "Barrier", "Once", "Semaphore", "Event", "Channel",
    "select", "SelectCase", "readable_case", "writable_case", "deadline_case",
    "Future", "wait_all", "wait_any", "group", "Group", "map",
    "wait_readable", "wait_writable", "notify_closing", "socket", "create_connection",
    "create_server", "SocketStream", "open_tcp_stream", "serve_tcp", "run_blocking",
    "blocking_cancelled",
    "getaddrinfo", "wrap_socket", "SSLSocket",
    "Error", "InvalidArgument", "NoMemory", "Closed", "ForkedError", "Timeout",
    "Cancelled", "DeadlockError", "OwnerDiedError", "NotOwnerError", "NoFiberError",
    "BusyError", "WrongSchedulerError", "ClosedResourceError", "NotSupportedError",
]
