"""px.map: the conformance names of the C map specs (map.<name>)."""
import pytest

import parataxis as px
from sync_kit import run

pytestmark = pytest.mark.group("map")   # tests/behaviours.txt: map.<name>


def test_results_keep_input_order_at_concurrency_1_4_and_1000():
    def body():
        def slow_first(i):
            # the early items end last: calls end in another order than they start
            for _ in range((1000 - i) % 7):
                px.yield_()
            return i * i
        for c in (1, 4, 1000, None):
            assert px.map(slow_first, range(1000), concurrency=c) == [i * i for i in range(1000)]
        assert px.map(str, iter([3, 1, 2])) == ["3", "1", "2"]    # any iterable
    run(body)


def test_first_failure_cancels_the_rest():
    def body():
        started, cancelled = [], []

        def call(i):
            started.append(i)
            if i == 5:
                raise ValueError(f"item {i}")
            try:
                px.sleep(3600)
            except px.Cancelled:
                cancelled.append(i)
                raise
        with pytest.raises(ValueError, match="item 5"):    # the first, itself
            px.map(call, range(20), concurrency=8)
        assert 5 in started and set(started) <= set(range(8))   # no more started
        assert sorted(cancelled) == sorted(set(started) - {5})

        def no_wait(i):                     # calls that never wait stop too
            started.append(i)
            if i == 0:
                raise KeyError(i)
        started.clear()
        with pytest.raises(KeyError):
            px.map(no_wait, range(100), concurrency=1)
        assert started == [0]
    run(body)


def test_concurrency_bounds_the_calls_in_flight():
    def body():
        for c in (1, 3, 10):
            now, peak = [0], [0]

            def call(i, now=now, peak=peak):
                now[0] += 1
                peak[0] = max(peak[0], now[0])
                px.yield_()
                px.yield_()
                now[0] -= 1
                return i
            assert px.map(call, range(50), concurrency=c) == list(range(50))
            assert peak[0] == c
    run(body)


def test_an_empty_input_returns_at_once():
    assert px.map(lambda x: x, []) == []                    # off-fiber too
    assert px.map(lambda x: x, (), concurrency=4) == []

    def body():
        t = px.now()
        assert px.map(lambda x: x, iter(())) == []
        assert px.now() - t < 1
    run(body)


def test_hostile_arguments():
    with pytest.raises(TypeError):
        px.map(3, [1])
    with pytest.raises(TypeError):
        px.map(str, 5)
    for bad in (1.5, "2", True):
        with pytest.raises(TypeError):
            px.map(str, [1], concurrency=bad)
    for bad in (0, -1):
        with pytest.raises(px.InvalidArgument):
            px.map(str, [1], concurrency=bad)
    with pytest.raises(px.NoFiberError):
        px.map(str, [1])                     # needs a fiber for its calls
    run(lambda: px.map(str, [1]))
