"""``torchx log --tail`` of one replica, on files in memory: lines cut as the watch cuts them, quiet streams read
as the watch reads them, a transient error of the service waited out."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

pytest.importorskip("torchx.specs", reason="the [torchx] extra is not installed")

from azure.core.exceptions import ServiceRequestError

from airflow_provider_azbatch.torchx.app import App, Replica, Role
from airflow_provider_azbatch.torchx.files import Files
from airflow_provider_azbatch.torchx.logs import ReplicaLog


@dataclass
class MemoryFiles(Files):
    data: dict[str, bytes]
    failures: list[BaseException] = field(default_factory=list)

    def _read(self, name: str, start: int, end: int) -> bytes | None:
        if self.failures:
            raise self.failures.pop(0)
        return self.data[name][start : end + 1] if name in self.data else None


@dataclass
class Reader:
    job_id: str = "torchx-app-1"


@dataclass
class Follower:
    """Each poll the replica has written more; it has ended at the last."""

    polls: list[tuple[bytes, bool]]
    files: MemoryFiles
    reader: Reader = field(default_factory=Reader)
    poll_seconds: float = 0.01
    waits: list[float | None] = field(default_factory=list)

    def app(self, *, fresh: bool = False) -> App:
        if fresh and len(self.polls) > 1 and self.waits:
            self.polls.pop(0)
        written, done = self.polls[0]
        self.files.data["stdout.txt"] = written
        replica = Replica("r", 0, "r", 0, files=self.files, done=done)
        role = Role("r", 0, "r", 1, "sh", replicas=[replica])
        return App("torchx-app-1", None, None, {}, [role], replica.state, None, None, False)

    def wait(self, seconds: float | None = None) -> None:
        self.waits.append(seconds)


def follow(follower: Follower) -> list[str]:
    log = ReplicaLog(follower, "r", 0, ("stdout.txt",), note=lambda _: None)
    return list(log.follow())


def test_a_followed_replica_shows_each_line_once_as_the_watch_cuts_it():
    files = MemoryFiles({})
    polls = [(b"one\nprogress 1\rprogress 2", False), (b"one\nprogress 1\rprogress 2\ntwo", False)]
    follower = Follower([*polls, (b"one\nprogress 1\rprogress 2\ntwo\n", True)], files)
    assert follow(follower) == ["one\n", "progress 2\n", "two\n"]


def test_a_transient_error_is_waited_out_and_reading_goes_on_where_it_was():
    files = MemoryFiles({}, failures=[ServiceRequestError("connection reset")])
    follower = Follower([(b"one\n", False), (b"one\ntwo\n", True)], files)
    assert follow(follower) == ["one\n", "two\n"]
    assert (follower.waits[0] or 0) > 0  # the outage policy's backoff


def test_an_error_that_is_not_transient_ends_the_follow_as_it_was_raised():
    files = MemoryFiles({}, failures=[PermissionError("no")])
    with pytest.raises(PermissionError, match="no"):
        follow(Follower([(b"one\n", True)], files))
