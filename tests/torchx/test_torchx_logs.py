"""``torchx log`` of every replica: followed live with both streams as they are written, one read of the app per
poll for all replicas, and ``since``/``until`` by the time each line was written; on the local Batch service with
Azurite as the account's storage."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import pytest

runner_api = pytest.importorskip("torchx.runner", reason="the [torchx] extra is not installed")

from torchx.schedulers.api import Stream  # noqa: E402
from torchx.specs import AppDef, Resource, Role  # noqa: E402

from airflow_provider_azbatch.torchx.logs import POLL_SECONDS  # noqa: E402
from tests.helpers import wait_until  # noqa: E402
from tests.torchx.conftest import job_of, pool_gone  # noqa: E402

pytestmark = pytest.mark.azurite

SMALL = Resource(cpu=1, gpu=0, memMB=512)
# The app reads of a followed app: the job, its tasks, a role's subtasks.
APP_READS = ("Jobs_GetJob", "Tasks_ListTasks", "Tasks_ListSubTasks")


def sh_role(name: str, script: str, **kwargs) -> Role:
    return Role(name, image="", entrypoint="sh", args=["-c", script], resource=SMALL, **kwargs)


class Follower:
    """``torchx log --tail <handle>`` in a process of its own, its stdout read line by line as it comes."""

    def __init__(self, handle: str, cwd: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "torchx.cli.main", "log", "--tail", handle],
            cwd=cwd,
            env=dict(os.environ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for(self, *expected: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not set(expected) <= set(self.lines):
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"waited for {expected}; printed so far: {self.lines}"
            try:
                line = self._queue.get(timeout=remaining)
            except queue.Empty:
                continue
            assert line is not None, f"it ended before printing {expected}: {self.lines}\n{self.stderr()}"
            self.lines.append(line)

    def stderr(self) -> str:
        assert self.process.stderr is not None
        return self.process.stderr.read() if self.process.poll() is not None else ""


def test_a_followed_app_shows_each_replicas_stderr_as_it_is_written_reading_the_app_once_a_poll(
    azbatch_with_storage, batch_client, tmp_path
):
    go_on, finish = tmp_path / "go-on", tmp_path / "finish"
    script = (
        'echo "out1 $TORCHX_REPLICA_ID"; '
        f"while [ ! -e {go_on} ]; do sleep 0.1; done; "
        'echo "err1 $TORCHX_REPLICA_ID" >&2; '
        f"while [ ! -e {finish} ]; do sleep 0.1; done; "
        'echo "out2 $TORCHX_REPLICA_ID"'
    )
    with runner_api.get_runner() as runner:
        handle = runner.run(AppDef("follow", roles=[sh_role("sh", script, num_replicas=2)]), "azure_batch", cfg={})
    job_id = job_of(handle)
    azbatch_with_storage.clear_request_log()
    started = time.time()
    follower = Follower(handle, tmp_path)
    follower.wait_for("sh/0 out1 0", "sh/1 out1 1")
    go_on.touch()
    # stderr while the replicas still run (each waits for `finish`): not after they end.
    follower.wait_for("sh/0 err1 0", "sh/1 err1 1")
    assert not [line for line in follower.lines if "out2" in line]
    finish.touch()
    follower.wait_for("sh/0 out2 0", "sh/1 out2 1")
    assert follower.process.wait(timeout=120) == 0, follower.stderr()
    followed = time.time() - started
    for k in (0, 1):
        assert [line for line in follower.lines if line.startswith(f"sh/{k} ")] == [
            f"sh/{k} out1 {k}",
            f"sh/{k} err1 {k}",
            f"sh/{k} out2 {k}",
        ]
    # The app is read once a poll for both replicas (and by torchx's describe once for each at the start).
    reads = [
        entry
        for entry in azbatch_with_storage.request_log(jobs=[job_id])
        if entry["operation"] in APP_READS and entry["at"] >= started
    ]
    subtask_listings = sum(1 for entry in reads if entry["operation"] == "Tasks_ListSubTasks")
    assert subtask_listings <= followed / POLL_SECONDS + 6, (subtask_listings, followed)


def test_since_and_until_select_by_when_a_line_was_written_and_both_streams_merge_in_time(
    azbatch_with_storage, batch_client
):
    script = 'echo "early $(date +%s)"; sleep 3; echo "middle $(date +%s)" >&2; sleep 3; echo "late $(date +%s)"'
    with runner_api.get_runner() as runner:
        handle = runner.run(AppDef("times", roles=[sh_role("t", script)]), "azure_batch", cfg={}, workspace=None)
        wait_until(lambda: pool_gone(batch_client, job_of(handle)), timeout=120, what="the app ended and its pool")

        def lines(**kwargs: object) -> list[str]:
            return [line.split()[0] for line in runner.log_lines(handle, "t", 0, **kwargs)]

        said = {line.split()[0]: int(line.split()[1]) for line in runner.log_lines(handle, "t", 0)}
        middle = datetime.fromtimestamp(said["middle"])
        # Read from what was kept (the pool is gone): stderr's line between stdout's, as written.
        assert lines() == ["early", "middle", "late"]
        assert lines(since=middle) == ["middle", "late"]
        assert lines(until=middle) == ["early", "middle"]
        assert lines(since=middle, until=middle) == ["middle"]
        assert lines(since=middle, streams=Stream.STDOUT) == ["late"]
        assert lines(regex="^(early|late)") == ["early", "late"]
