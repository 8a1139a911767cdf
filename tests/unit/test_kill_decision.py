"""A cancelled trigger tells a user's kill from a triggerer restart, a handover and a deferral timeout by what the
triggerer says of its task instance (triggers/kill.py): one decision, on every Airflow line."""

from __future__ import annotations

import asyncio

import pytest

from airflow_provider_azbatch.triggers.kill import KillFacts, decide

JOB = "train-job"


def claim(try_number: int, job_id: str = JOB) -> dict:
    return {"job_id": job_id, "try_number": try_number, "account_name": "acct"}


@pytest.mark.parametrize(
    ("facts", "terminate", "why"),
    [
        # A restart, a graceful shutdown, a handover: the task instance is still deferred in this try.
        (
            KillFacts("deferred", claim(1)),
            False,
            f"Batch job {JOB} goes on: the task is still deferred "
            "(its trigger moves to another triggerer, or this triggerer stops)",
        ),
        (
            KillFacts("deferred", None),
            False,
            f"Batch job {JOB} goes on: the task is still deferred "
            "(its trigger moves to another triggerer, or this triggerer stops)",
        ),
        # Marked failed or success, cleared (no state yet, or scheduled/queued for its next try).
        (KillFacts("failed", claim(1)), True, "the task was marked failed"),
        (KillFacts("success", claim(1)), True, "the task was marked success"),
        (KillFacts("none", claim(1)), True, "the task was cleared"),
        (KillFacts("scheduled", claim(1)), True, "the task is scheduled now"),
        # The next try started (its start cleared the XCom) and has not claimed a job yet.
        (KillFacts("running", None), True, "the task is running now"),
        # Cleared, and its next try deferred before this trigger was cancelled: deferred again, in another try.
        (
            KillFacts("deferred", claim(2, f"{JOB}-a2")),
            True,
            f"the task was cleared: try 1 is over, try 2 runs job {JOB}-a2",
        ),
        # ... or that next try reattached to this very job (it was still active): it is that try's job now.
        (KillFacts("deferred", claim(2)), False, f"Batch job {JOB} goes on: try 2 of the task watches it now"),
        (KillFacts("running", claim(2)), False, f"Batch job {JOB} goes on: try 2 of the task watches it now"),
        # Airflow's deferral timeout: the task resumes and ends the job with its own reason.
        (
            KillFacts("unknown", timed_out=True),
            False,
            f"Batch job {JOB}: the deferral timed out; the task ends the job when it resumes",
        ),
    ],
)
def test_the_verdict_for_each_thing_that_cancels_a_trigger(facts, terminate, why):
    verdict = decide(JOB, 1, facts)
    assert (verdict.terminate, verdict.why) == (terminate, why)


def test_a_claim_of_an_earlier_or_unknown_try_leaves_the_state_to_decide():
    assert decide(JOB, 3, KillFacts("deferred", claim(2))).terminate is False
    assert decide(JOB, 3, KillFacts("failed", claim(2))).terminate is True
    assert decide(JOB, None, KillFacts("deferred", claim(2, "other"))).terminate is False
    assert decide(JOB, 1, KillFacts("deferred", {"job_id": JOB, "try_number": "2"})).terminate is False


def _held(answered: bool | None, read_answers: bool, monkeypatch) -> tuple[bool, list[str]]:
    """Whether a cancelled trigger waits for its kill check (which ends when the test says), and what it asked."""
    from airflow_provider_azbatch.triggers import checkpoints, kill

    monkeypatch.setattr(checkpoints, "FINAL_CHECKPOINT_SECONDS", 0.1)
    monkeypatch.setattr(kill, "KILL_CHECK_SECONDS", 60.0)
    asked: list[str] = []

    async def read() -> None:
        asked.append("read")
        if not read_answers:
            await asyncio.Event().wait()

    async def scenario() -> bool:
        killed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        hold = asyncio.ensure_future(kill.hold_for_the_check(killed, answered, read))
        done, _ = await asyncio.wait([hold], timeout=1.0)  # far more than the read's 0.1 s, far less than 60 s
        killed.set_result(None)
        await asyncio.wait_for(hold, 5)
        return not done

    return asyncio.run(scenario()), asked


def test_a_cancelled_trigger_waits_for_its_kill_check_while_the_triggerer_answers(monkeypatch):
    assert _held(True, read_answers=False, monkeypatch=monkeypatch) == (True, [])
    assert _held(None, read_answers=True, monkeypatch=monkeypatch) == (True, ["read"])


def test_a_stopping_triggerer_is_not_held_for_a_kill_check_it_will_not_answer(monkeypatch):
    # Its last checkpoint write went unanswered, or (nothing to write) a read did: it stops.
    assert _held(False, read_answers=True, monkeypatch=monkeypatch) == (False, [])
    assert _held(None, read_answers=False, monkeypatch=monkeypatch) == (False, ["read"])
