"""What the sync tests share: waiting for a state of the run by yielding (never
by sleeping), running a body as px.run's main, cancelling from another thread."""
import threading

import parataxis as px

TIMEOUT = 10.0      # generous: a noisy 2-core machine; never reached when all is well
ROUNDS = 10000      # yields before until() gives up


def until(pred, what="the condition"):
    """Yields until pred() holds (every other ready fiber runs once per yield)."""
    for _ in range(ROUNDS):
        if pred():
            return
        px.yield_()
    raise AssertionError(f"never reached: {what}")


def settle(n=5):
    """Lets the other fibers run until they parked (n rounds of yields)."""
    for _ in range(n):
        px.yield_()


def run(body, *args):
    """px.run(body, *args) under a timeout scope, so a lost wake-up fails the
    test instead of hanging it."""
    def main():
        with px.timeout(TIMEOUT):
            return body(*args)
    return px.run(main)


def cancel_from_thread(tok):
    """tok.cancel() on another OS thread; returns once it was called."""
    t = threading.Thread(target=tok.cancel)
    t.start()
    t.join(TIMEOUT)
    assert not t.is_alive()
    assert tok.cancelled


def outcome(fiber):
    """The exception type a fiber ended with, or its result."""
    try:
        return fiber.join()
    except px.Error as e:
        return type(e)
