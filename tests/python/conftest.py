import concurrent.futures
import sys
import threading

import pytest

TIMEOUT = 10.0   # generous: a 2-core noisy VM


class SubmitCounting(concurrent.futures.ThreadPoolExecutor):
    """A ThreadPoolExecutor that tells when something was submitted."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.submitted = threading.Semaphore(0)

    def submit(self, *a, **kw):
        f = super().submit(*a, **kw)
        self.submitted.release()
        return f


class Recorder:
    """Collects handler calls; wait_for(n) blocks until n calls arrived."""

    def __init__(self):
        self.calls = []
        self.threads = []
        self.cond = threading.Condition()

    def __call__(self, aborted):
        with self.cond:
            self.calls.append(aborted)
            self.threads.append(threading.get_ident())
            self.cond.notify_all()

    def wait_for(self, n, timeout=TIMEOUT):
        with self.cond:
            ok = self.cond.wait_for(lambda: len(self.calls) >= n, timeout)
        assert ok, f"only {len(self.calls)} of {n} calls arrived"
        return self.calls


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "group(name): the group of tests/behaviours.txt the test's name is "
        "in (default: the module's name without test_; tests/conformance.py)")


@pytest.fixture
def rec():
    return Recorder()


class _Seen(list):
    cond = None


@pytest.fixture
def unraisable(monkeypatch):
    seen = _Seen()
    cond = threading.Condition()

    def hook(u):
        with cond:
            seen.append(u)
            cond.notify_all()

    monkeypatch.setattr(sys, "unraisablehook", hook)
    seen.cond = cond
    return seen
