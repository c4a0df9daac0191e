"""Handlers redirected to an asyncio loop, a concurrent.futures executor and a
HandlerQueue -- and cancel winning while an expired handler waits in each."""
import asyncio
import concurrent.futures
import select
import threading
import time

import pytest

import parataxis
from conftest import TIMEOUT, SubmitCounting


def wait_until(pred, timeout=TIMEOUT):
    end = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < end, "condition never became true"
        time.sleep(0.001)


# -- asyncio -----------------------------------------------------------------

def test_asyncio_handlers_run_on_loop_thread():
    async def main():
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        seen = []

        def h(aborted):
            seen.append((aborted, threading.get_ident()))
            if len(seen) == 2:
                fut.set_result(None)

        with parataxis.TimerQueue(executor=loop) as q:
            q.add(0.01, h)
            q.add(0.02, h)
            await asyncio.wait_for(fut, TIMEOUT)
        return seen

    seen = asyncio.run(main())
    me = threading.get_ident()
    assert seen == [(False, me), (False, me)]


def test_asyncio_cancel_wins_while_waiting_in_loop():
    async def main():
        loop = asyncio.get_running_loop()
        calls = []
        q = parataxis.TimerQueue(executor=loop)
        tid = q.add(0, calls.append)
        # Block the loop thread until the expired call sits in the loop's queue.
        wait_until(lambda: len(q._hq) == 1)
        assert calls == []
        assert q.cancel(tid) is True
        for _ in range(100):
            if calls:
                break
            await asyncio.sleep(0.01)
        q.close()
        return calls

    assert asyncio.run(main()) == [True]


def test_asyncio_close_aborts_on_loop_thread():
    async def main():
        loop = asyncio.get_running_loop()
        calls = []
        q = parataxis.TimerQueue(executor=loop)
        q.add(60, calls.append)
        q.add_periodic(60, 1, calls.append)
        q.close()                     # aborted calls run here, before close returns
        return calls

    assert asyncio.run(main()) == [True, True]


def test_asyncio_queue_made_before_loop_runs():
    loop = asyncio.new_event_loop()
    try:
        calls = []
        q = parataxis.TimerQueue(executor=loop)
        q.add(0.01, lambda a: (calls.append(a), loop.stop()))
        loop.call_later(TIMEOUT, loop.stop)
        loop.run_forever()
        q.close()
        assert calls == [False]
    finally:
        loop.close()


# -- concurrent.futures --------------------------------------------------------

def test_futures_executor_runs_handlers_in_pool():
    calls, done = [], threading.Event()
    with concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="pool") as ex:
        with parataxis.TimerQueue(executor=ex) as q:
            q.add(0.01, lambda a: (calls.append((a, threading.current_thread().name)),
                                   done.set()))
            assert done.wait(TIMEOUT)
    assert calls[0][0] is False and calls[0][1].startswith("pool")


def test_futures_cancel_wins_while_waiting_in_executor():
    gate = threading.Event()
    calls, done = [], threading.Event()
    with SubmitCounting(1) as ex:
        ex.submit(gate.wait, TIMEOUT)          # occupies the only pool thread
        assert ex.submitted.acquire(timeout=TIMEOUT)
        with parataxis.TimerQueue(executor=ex) as q:
            tid = q.add(0, lambda a: (calls.append(a), done.set()))
            assert ex.submitted.acquire(timeout=TIMEOUT)   # expired, posted
            assert q.cancel(tid) is True
            gate.set()
            assert done.wait(TIMEOUT)
    assert calls == [True]


def test_futures_executor_shut_down_runs_inline():
    # submit raises RuntimeError: the handler runs on the worker, aborted.
    ex = concurrent.futures.ThreadPoolExecutor(1)
    ex.shutdown()
    calls, done = [], threading.Event()
    with parataxis.TimerQueue(executor=ex) as q:
        q.add(0, lambda a: (calls.append(a), done.set()))
        assert done.wait(TIMEOUT)
    assert calls == [True]


# -- HandlerQueue ---------------------------------------------------------------

def test_handler_queue_fd_readiness_select_and_poll():
    with parataxis.HandlerQueue() as hq, parataxis.TimerQueue(executor=hq) as q:
        fd = hq.fileno()
        assert select.select([fd], [], [], 0)[0] == []
        calls = []
        q.add(0.01, calls.append)
        r, _, _ = select.select([fd], [], [], TIMEOUT)
        assert r == [fd]
        assert calls == []                      # nothing runs until drained
        assert hq.drain() == 1
        assert calls == [False]
        p = select.poll()
        p.register(fd, select.POLLIN)
        assert p.poll(0) == []                  # drain cleared readiness
        q.add(0.01, calls.append)
        q.add(0.01, calls.append)
        wait_until(lambda: len(hq) == 2)
        assert p.poll(TIMEOUT * 1000)[0][0] == fd
        assert hq.drain(1) == 1                 # budget leaves one behind ...
        assert p.poll(0)[0][0] == fd            # ... and the fd stays readable
        assert hq.drain() == 1
        assert p.poll(0) == []
        assert calls == [False, False, False]


def test_handler_queue_wait_and_cancel_wins_while_queued():
    with parataxis.HandlerQueue() as hq, parataxis.TimerQueue(executor=hq) as q:
        calls = []
        tid = q.add(0, calls.append)
        assert hq.wait(TIMEOUT) is True
        assert q.cancel(tid) is True           # expired, queued, not started
        assert hq.drain() == 1
        assert calls == [True]
        assert hq.wait(0.01) is False
        with pytest.raises(ValueError):
            hq.wait(-1)


def test_handler_queue_close_closes_its_timer_queues():
    hq = parataxis.HandlerQueue()
    q = parataxis.TimerQueue(executor=hq)
    calls = []
    q.add(60, calls.append)
    hq.close()                                  # closes q, runs the aborted call
    assert q.closed and calls == [True]
    with pytest.raises(parataxis.Closed):
        hq.drain()
