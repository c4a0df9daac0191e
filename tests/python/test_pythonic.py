"""What a Python user expects: InvalidArgument for bad durations, TypeError for
a timer id that is not an int, readable reprs, exceptions named parataxis.X,
contextvars carried into handlers, a Timer's waiters in the order added."""
import asyncio
import contextvars
import math
import pickle
import threading

import pytest

import parataxis
from conftest import TIMEOUT, Recorder

BAD_DELAYS = [-1, -0.5, math.nan, -math.inf, -10**400]   # too long: "never" (issue 18)


@pytest.mark.parametrize("bad", BAD_DELAYS)
def test_bad_durations_raise_invalid_argument(bad):
    with parataxis.TimerQueue() as q, parataxis.HandlerQueue() as hq:
        t = parataxis.Timer(q)
        calls = [
            lambda: q.add(bad, print),
            lambda: q.add_periodic(bad, 1, print),
            lambda: q.add_periodic(1, bad, print),
            lambda: t.expires_after(bad),
            lambda: hq.wait(bad),
        ]
        for call in calls:
            with pytest.raises(parataxis.InvalidArgument) as e:
                call()
            assert isinstance(e.value, ValueError)
        assert q.pending == 0


class _LyingFloat(float):
    def __ge__(self, other):
        return True

    def __lt__(self, other):
        return True


class _LyingInt(int):
    def __ge__(self, other):
        return True

    def __mul__(self, other):
        return -5


@pytest.mark.parametrize("bad", [_LyingFloat(-1.0), _LyingFloat(math.nan), _LyingInt(-3)])
def test_number_subclasses_are_read_as_their_value(bad):
    # A subclass of float or int is the number it holds, whatever its
    # operators say: a negative one is InvalidArgument (it was a timer in the
    # past, or NoMemory, or ValueError from int(nan)).
    with parataxis.TimerQueue() as q, parataxis.HandlerQueue() as hq:
        t = parataxis.Timer(q)
        calls = [
            lambda: q.add(bad, print),
            lambda: q.add_periodic(bad, 1, print),
            lambda: q.add_periodic(1, bad, print),
            lambda: t.expires_after(bad),
            lambda: hq.wait(bad),
        ]
        for call in calls:
            with pytest.raises(parataxis.InvalidArgument):
                call()
        assert q.pending == 0


def test_zero_period_and_negative_budget_raise_invalid_argument():
    with parataxis.TimerQueue() as q, parataxis.HandlerQueue() as hq:
        with pytest.raises(parataxis.InvalidArgument):
            q.add_periodic(0, 0, print)
        with pytest.raises(parataxis.InvalidArgument):
            hq.drain(-1)


@pytest.mark.parametrize("bad", [True, False, "x", 1.0, None, b"1"])
def test_cancel_with_a_non_int_id_raises_type_error(bad):
    rec = Recorder()
    with parataxis.TimerQueue() as q:
        tid = q.add(60, rec)
        with pytest.raises(TypeError, match="timer id"):
            q.cancel(bad)
        assert q.pending == 1 and rec.calls == []   # no timer was touched
        assert q.cancel(tid) is True
    assert rec.calls == [True]


def test_reprs_say_what_and_which_state():
    hq = parataxis.HandlerQueue()
    q = parataxis.TimerQueue()
    qh = parataxis.TimerQueue(executor=hq)
    t = parataxis.Timer(q)
    q.add(60, print)
    assert repr(q).startswith("<parataxis.TimerQueue ") and "pending=1" in repr(q)
    assert "HandlerQueue" in repr(qh)
    assert repr(hq).startswith("<parataxis.HandlerQueue ") and "queued=0" in repr(hq)
    assert repr(t).startswith("<parataxis.Timer ") and "expiry=" in repr(t)
    t.close()
    assert "closed" in repr(t)
    q.close()
    qh.close()
    hq.close()
    for obj in (q, qh, hq):
        assert repr(obj).endswith(" closed>"), repr(obj)


def test_reprs_of_asyncio_and_futures_queues():
    async def main():
        with parataxis.TimerQueue(executor=asyncio.get_running_loop()) as q:
            return repr(q)

    assert "EventLoop" in asyncio.run(main())
    import concurrent.futures
    with concurrent.futures.ThreadPoolExecutor(1) as ex:
        with parataxis.TimerQueue(executor=ex) as q:
            assert "ThreadPoolExecutor" in repr(q)


@pytest.mark.parametrize("name", [
    "Error", "InvalidArgument", "NoMemory", "Closed", "ForkedError", "TimerQueue",
    "Timer", "HandlerQueue"])
def test_public_classes_show_as_parataxis_names(name):
    cls = getattr(parataxis, name)
    assert cls.__module__ == "parataxis"
    assert repr(cls) == f"<class 'parataxis.{name}'>"


def test_exceptions_pickle_and_print_under_their_public_name():
    e = pickle.loads(pickle.dumps(parataxis.Closed("TimerQueue is closed")))
    assert type(e) is parataxis.Closed and str(e) == "TimerQueue is closed"
    import traceback
    text = "".join(traceback.format_exception_only(type(e), e))
    assert text.startswith("parataxis.Closed: ")


VAR = contextvars.ContextVar("VAR", default="unset")


@pytest.mark.parametrize("kind", ["worker", "handlerqueue", "futures"])
def test_contextvars_are_carried_into_handlers(kind):
    import concurrent.futures
    seen, done = [], threading.Semaphore(0)

    def handler(aborted):
        seen.append((VAR.get(), aborted))
        VAR.set("changed by the handler")      # stays in the handler's context
        done.release()

    def tick(aborted):                         # every tick in the same context
        seen.append((VAR.get(), aborted))
        done.release()

    pool = concurrent.futures.ThreadPoolExecutor(1)
    hq = parataxis.HandlerQueue()
    executor = {"worker": None, "handlerqueue": hq, "futures": pool}[kind]
    with parataxis.TimerQueue(executor=executor) as q:
        t = parataxis.Timer(q)
        token = VAR.set("at add")
        q.add(0, handler)
        q.add(60, handler)                     # aborted at close
        pid = q.add_periodic(0, 0.001, tick)
        t.expires_after(0)
        t.async_wait(handler)
        VAR.reset(token)
        assert VAR.get() == "unset"
        if kind == "handlerqueue":
            while len(seen) < 3:
                hq.wait(TIMEOUT)
                hq.drain()
        else:
            for _ in range(3):
                assert done.acquire(timeout=TIMEOUT)
        q.cancel(pid)
        t.close()
    hq.close()
    pool.shutdown()
    assert len(seen) >= 4
    assert all(v == "at add" for v, _ in seen), seen
    assert VAR.get() == "unset"


def test_timer_waiters_run_in_the_order_added():
    n = 20
    with parataxis.TimerQueue() as q:
        for _ in range(3):
            order, done = [], threading.Event()
            t = parataxis.Timer(q)
            t.expires_after(0.01)
            for i in range(n):
                t.async_wait(lambda aborted, i=i: (order.append(i),
                                                   len(order) == n and done.set()))
            assert done.wait(TIMEOUT)
            assert order == list(range(n))
            t.close()
