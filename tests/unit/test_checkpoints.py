"""The trigger's checkpoints: bounded in rate, coalesced, off the poll's path, none too early."""

from __future__ import annotations

import asyncio
import time

import pytest

from airflow_provider_azbatch.triggers.checkpoints import Checkpoints


@pytest.mark.serial
def test_writes_are_bounded_coalesced_and_the_last_state_is_kept():
    written: list[dict] = []

    async def write(state: dict) -> None:
        await asyncio.sleep(0.01)  # a write through the execution API takes a while
        written.append(state)

    async def scenario() -> float:
        checkpoints = Checkpoints(write, interval=0.2, not_before=time.time())
        started = time.monotonic()
        for poll in range(100):  # a poll every 10 ms, each moving the state
            checkpoints.offer({"offset": poll})
            await asyncio.sleep(0.01)
        elapsed = time.monotonic() - started
        await checkpoints.close(final=True)
        return elapsed

    elapsed = asyncio.run(scenario())
    # At most one write per interval (plus the first and the final one), each of the latest state then.
    assert len(written) <= elapsed / 0.2 + 2
    assert len(written) >= 3
    assert written[-1] == {"offset": 99}
    offsets = [state["offset"] for state in written]
    assert offsets == sorted(offsets)


def test_nothing_is_written_before_not_before_nor_when_nothing_moved():
    written: list[dict] = []

    async def write(state: dict) -> None:
        written.append(state)

    async def scenario() -> None:
        checkpoints = Checkpoints(write, interval=0.05, not_before=time.time() + 60)
        checkpoints.offer({"offset": 0}, written=True)
        checkpoints.offer({"offset": 0})  # the state the watch started from: nothing moved
        checkpoints.offer({"offset": 5})
        await asyncio.sleep(0.2)
        await checkpoints.close(final=True)  # even a graceful stop writes nothing that early

    asyncio.run(scenario())
    assert written == []


@pytest.mark.serial
def test_offering_never_waits_for_a_write():
    release = asyncio.Event

    async def scenario() -> float:
        gate = release()

        async def slow_write(state: dict) -> None:
            await gate.wait()

        checkpoints = Checkpoints(slow_write, interval=0.0, not_before=0.0)
        started = time.monotonic()
        for poll in range(1000):
            checkpoints.offer({"offset": poll})
        spent = time.monotonic() - started
        gate.set()
        await checkpoints.close(final=False)
        return spent

    assert asyncio.run(scenario()) < 0.5


def test_a_stalled_watch_writes_no_checkpoint():
    # A watch that has not polled for max_age was stalled: another trigger may have checkpointed further since.
    written: list[dict] = []

    async def write(state: dict) -> None:
        written.append(state)

    async def scenario() -> None:
        checkpoints = Checkpoints(write, interval=0.0, not_before=0.0, max_age=0.1)
        checkpoints.offer({"offset": 1})
        await asyncio.sleep(0.05)
        assert written == [{"offset": 1}]  # fresh: written at once
        checkpoints.offer({"offset": 2})
        time.sleep(0.2)  # the event loop stalls (a frozen process) before the write runs
        await asyncio.sleep(0.05)
        await checkpoints.close(final=True)  # nor is it written last

    asyncio.run(scenario())
    assert written == [{"offset": 1}]


def test_a_state_taken_over_is_not_written_back():
    # The watch caught up with a checkpoint another trigger wrote: that one is stored, nothing to write.
    written: list[dict] = []

    async def write(state: dict) -> None:
        written.append(state)

    async def scenario() -> None:
        checkpoints = Checkpoints(write, interval=60.0, not_before=0.0)
        checkpoints.offer({"offset": 1})
        await asyncio.sleep(0.05)
        checkpoints.offer({"offset": 2})  # waits for the interval
        checkpoints.offer({"offset": 9}, written=True)  # caught up with the other trigger's checkpoint
        await checkpoints.close(final=True)

    asyncio.run(scenario())
    assert written == [{"offset": 1}]


def test_the_last_write_says_whether_the_triggerer_answered_it(monkeypatch):
    # A stopping triggerer answers nothing more: the trigger then holds nothing for it (triggers/kill.py).
    from airflow_provider_azbatch.triggers import checkpoints as module

    monkeypatch.setattr(module, "FINAL_CHECKPOINT_SECONDS", 0.2)
    answering = True

    async def last(offer: dict | None) -> bool | None:
        written = asyncio.Event()

        async def write(state: dict) -> None:
            if state != {"offset": 1} and not answering:
                await asyncio.Event().wait()
            written.set()

        checkpoints = Checkpoints(write, interval=60.0, not_before=0.0)
        checkpoints.offer({"offset": 1})
        await asyncio.wait_for(written.wait(), 5)  # the first write waits for no interval
        if offer is not None:
            checkpoints.offer(offer)
        return await checkpoints.close(final=True)

    assert asyncio.run(last({"offset": 2})) is True
    assert asyncio.run(last(None)) is None  # nothing moved since: nothing written, nothing learnt
    answering = False
    assert asyncio.run(last({"offset": 2})) is False
