"""Exactly once for every concurrent.futures executor a TimerQueue accepts: the
ones that cannot run a local callable are refused at construction, and a call
the executor cancels or fails to start runs inline with aborted=True."""
import concurrent.futures
import threading

import pytest

import parataxis
from conftest import TIMEOUT, Recorder, SubmitCounting


class FailingExecutor(concurrent.futures.Executor):
    """Accepts every call and fails its future without running it (as an
    executor that pickles the callable would)."""

    def submit(self, fn, *args, **kwargs):
        f = concurrent.futures.Future()
        f.set_exception(RuntimeError("cannot run this here"))
        return f


class CancellingExecutor(concurrent.futures.Executor):
    """Keeps every call's future and cancels it later, from another thread."""

    def __init__(self):
        self.futures = []
        self.submitted = threading.Semaphore(0)

    def submit(self, fn, *args, **kwargs):
        f = concurrent.futures.Future()
        self.futures.append(f)
        self.submitted.release()
        return f


class ProcessPoolSubclass(concurrent.futures.ProcessPoolExecutor):
    pass


@pytest.mark.parametrize("cls", [concurrent.futures.ProcessPoolExecutor, ProcessPoolSubclass])
def test_process_pool_executor_refused(cls):
    ex = cls(1)
    try:
        with pytest.raises(TypeError, match="ProcessPoolExecutor"):
            parataxis.TimerQueue(executor=ex)
    finally:
        ex.shutdown()


def test_shutdown_cancel_futures_runs_handler_inline_aborted():
    gate = threading.Event()
    rec = Recorder()
    ex = SubmitCounting(1)
    ex.submit(gate.wait, TIMEOUT)              # occupies the only pool thread
    assert ex.submitted.acquire(timeout=TIMEOUT)
    with parataxis.TimerQueue(executor=ex) as q:
        tid = q.add(0, rec)
        assert ex.submitted.acquire(timeout=TIMEOUT)   # expired, submitted, queued
        ex.shutdown(wait=False, cancel_futures=True)
        assert rec.calls == [True]             # inline, in the cancelling thread
        assert rec.threads == [threading.get_ident()]
        assert q.cancel(tid) is False          # its one call was made
        gate.set()
    ex.shutdown()
    assert rec.calls == [True]


def test_future_failing_without_running_gives_aborted_call():
    rec = Recorder()
    with parataxis.TimerQueue(executor=FailingExecutor()) as q:
        q.add(0, rec)
        assert rec.wait_for(1) == [True]
    assert rec.calls == [True]


def test_periodic_tick_that_cannot_start_is_its_final_call():
    rec = Recorder()
    with parataxis.TimerQueue(executor=FailingExecutor()) as q:
        tid = q.add_periodic(0, 0.001, rec)
        assert rec.wait_for(1) == [True]       # the final call: no more ticks
        assert q.cancel(tid) is False
        assert q.pending == 0
    assert rec.calls == [True]


def test_cancelled_future_gives_aborted_call_once():
    ex = CancellingExecutor()
    rec = Recorder()
    with parataxis.TimerQueue(executor=ex) as q:
        q.add(0, rec)
        assert ex.submitted.acquire(timeout=TIMEOUT)
        t = threading.Thread(target=lambda: [f.cancel() for f in ex.futures])
        t.start()
        t.join()
        assert rec.wait_for(1) == [True]
        assert rec.threads[0] == t.ident
        for f in ex.futures:                   # too late: the call was made
            f.cancel()
    assert rec.calls == [True]


def test_cancelled_future_with_handle_and_context():
    """The merged items together: the aborted call a cancelled future makes
    inline runs once, in the context copied at the add; the handle says it
    was not cancelled (no cancel() returned True) and can no longer be."""
    import contextvars
    var = contextvars.ContextVar("var", default="unset")
    ex = CancellingExecutor()
    seen = []
    with parataxis.TimerQueue(executor=ex) as q:
        token = var.set("at add")
        h = q.add(0, lambda aborted: seen.append((var.get(), aborted)))
        var.reset(token)
        assert ex.submitted.acquire(timeout=TIMEOUT)
        assert [f.cancel() for f in ex.futures] == [True]
        assert seen == [("at add", True)]
        assert h.cancel() is False and q.cancel(h) is False
        assert h.cancelled() is False
    assert seen == [("at add", True)]
