"""The stores' shared deadline timer behaves as ``asyncio.timeout`` does, for one operation and for many."""

from __future__ import annotations

import asyncio

import pytest

from chatlab.stores._deadlines import Deadlines


def test_an_operation_past_its_deadline_raises_timeout_error_and_others_finish() -> None:
    async def main() -> None:
        deadlines = Deadlines(0.2)
        slow = asyncio.create_task(deadlines.run(asyncio.sleep(10)))
        await asyncio.sleep(0.1)
        later = asyncio.create_task(deadlines.run(asyncio.sleep(0.25, "late")))  # due at 0.3 s, ends at 0.35 s
        started = asyncio.get_running_loop().time()
        assert await deadlines.run(asyncio.sleep(0.01, "quick")) == "quick"
        with pytest.raises(TimeoutError):
            await slow
        assert asyncio.get_running_loop().time() - started < 0.3  # cancelled at its deadline (0.2 s)
        with pytest.raises(TimeoutError):
            await later
        assert await deadlines.run(asyncio.sleep(0, "after")) == "after"  # the timer is set again

    asyncio.run(main())


def test_a_cancellation_from_elsewhere_stays_a_cancellation() -> None:
    async def main() -> None:
        deadlines = Deadlines(5.0)
        task = asyncio.create_task(deadlines.run(asyncio.sleep(10)))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())


def test_a_timeout_inside_an_outer_one_is_the_inner_one_s() -> None:
    async def main() -> None:
        deadlines = Deadlines(0.05)
        async with asyncio.timeout(5):  # the outer timeout is not the one that expired
            with pytest.raises(TimeoutError):
                await deadlines.run(asyncio.sleep(10))
            assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]

    asyncio.run(main())
