"""What a trigger asks the triggerer once it is cancelled (its task instance's state: how it tells a kill from a
restart before Airflow 3.3) reaches the supervisor and comes back on every line, through the line's own
``TriggerCommsDecoder`` and a supervisor answering on the other end of a socket pair, even when the trigger is
cancelled again while it waits: on 3.0 and 3.1 a request cancelled before its reply leaves that reply to the next
request, which then fails (the triggerer process dies of it); ``compat.to_reply`` runs the request to its reply."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from typing import Any

import attrs
import msgspec
import pytest
from airflow.jobs.triggerer_job_runner import TriggerCommsDecoder
from airflow.sdk.execution_time import task_runner
from airflow.sdk.execution_time.comms import GetTaskStates, _RequestFrame, _ResponseFrame

from airflow_provider_azbatch import compat

WHERE = {"dag_id": "d", "task_id": "t", "run_id": "r", "map_index": -1}


class Supervisor:
    """The triggerer's supervisor end: answers each request with the next state, once the test lets it."""

    def __init__(self, sock: socket.socket, states: list[str]) -> None:
        self.sock = sock
        self.states = list(states)
        self.received = threading.Semaphore(0)
        self.answer = threading.Semaphore(0)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        decoder = msgspec.msgpack.Decoder(_RequestFrame)
        try:
            while self.states:
                length = int.from_bytes(_read(self.sock, 4), "big")
                request = decoder.decode(_read(self.sock, length))
                self.received.release()
                self.answer.acquire()
                body: dict[str, Any] = {"task_states": {"r": {"t": self.states.pop(0)}}, "type": "TaskStatesResult"}
                self.sock.sendall(_ResponseFrame(id=request.id, body=body).as_bytes())
        except (EOFError, OSError):
            return


def _read(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


async def _decoder(sock: socket.socket) -> TriggerCommsDecoder:
    reader, writer = await asyncio.open_connection(sock=sock)
    extra = {"socket": sock} if "socket" in attrs.fields_dict(TriggerCommsDecoder) else {}
    decoder = TriggerCommsDecoder(async_reader=reader, async_writer=writer, **extra)
    start_reader = getattr(decoder, "start_reader", None)
    if start_reader is not None:  # 3.2+: replies are read by a reader task of the decoder's own
        await start_reader()
    return decoder


async def _received(supervisor: Supervisor | Recorder) -> None:
    assert await asyncio.to_thread(supervisor.received.acquire, True, 30), "the request never reached the supervisor"


@pytest.fixture
def comms(monkeypatch):
    runner_end, supervisor_end = socket.socketpair()
    yield runner_end, supervisor_end
    runner_end.close()
    supervisor_end.close()


def test_a_request_cancelled_before_its_reply_still_reads_it_and_the_next_gets_its_own(comms, monkeypatch):
    runner_end, supervisor_end = comms
    supervisor = Supervisor(supervisor_end, ["failed", "success"])

    async def scenario() -> tuple[str, str]:
        monkeypatch.setattr(task_runner, "SUPERVISOR_COMMS", await _decoder(runner_end), raising=False)
        first = asyncio.ensure_future(compat.atask_state(**WHERE))
        await _received(supervisor)
        first.cancel()  # the triggerer cancels the trigger again while it waits
        with pytest.raises(asyncio.CancelledError):
            await first
        supervisor.answer.release()
        while compat._unanswered:  # the cancelled caller's request goes on to its reply
            await asyncio.sleep(0.01)
        second = asyncio.ensure_future(compat.atask_state(**WHERE))
        await _received(supervisor)
        supervisor.answer.release()
        return "cancelled", await asyncio.wait_for(second, 30)

    assert asyncio.run(scenario()) == ("cancelled", "success")


def test_a_request_cancelled_on_its_own_path_breaks_the_next_one_on_3_0_and_3_1_only(comms, monkeypatch):
    """Why ``compat.to_reply`` exists: the same cancellation of a plain ``asend``."""
    runner_end, supervisor_end = comms
    supervisor = Supervisor(supervisor_end, ["failed", "success"])
    request = GetTaskStates(dag_id="d", task_ids=["t"], run_ids=["r"], map_index=-1)

    async def scenario() -> Any:
        decoder = await _decoder(runner_end)
        first = asyncio.ensure_future(decoder.asend(request))
        await _received(supervisor)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        supervisor.answer.release()
        second = asyncio.ensure_future(decoder.asend(request))
        await _received(supervisor)
        supervisor.answer.release()
        return await asyncio.wait_for(second, 30)

    if compat.AIRFLOW_V_3_2_PLUS:
        assert asyncio.run(scenario()).task_states == {"r": {"t": "success"}}
    else:
        with pytest.raises(RuntimeError, match="Response read out of order"):
            asyncio.run(scenario())


class Recorder:
    """A supervisor end that notes each request's XCom value and answers none until the test says (then each,
    with no body, as a supervisor answers a write)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.values: list[Any] = []
        self.ids: list[int] = []
        self.received = threading.Semaphore(0)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        decoder = msgspec.msgpack.Decoder(_RequestFrame)
        try:
            while True:
                length = int.from_bytes(_read(self.sock, 4), "big")
                request = decoder.decode(_read(self.sock, length))
                self.values.append(request.body.get("value"))
                self.ids.append(request.id)
                self.received.release()
        except (EOFError, OSError):
            return

    def answer_all(self) -> None:
        for request_id in self.ids:
            self.sock.sendall(_ResponseFrame(id=request_id, body=None).as_bytes())


@pytest.mark.skipif(not compat.TRIGGER_XCOM, reason="this line gives triggers no XCom")
def test_a_checkpoint_written_after_an_unanswered_one_still_reaches_the_supervisor(comms, monkeypatch):
    """A stopping triggerer never reads the reply to a write in flight: the trigger's last checkpoint, written
    after it, must reach the supervisor all the same (3.2's synchronous XCom calls share one worker thread, where
    it waited behind the first one for ever, and so did the process's exit)."""
    runner_end, supervisor_end = comms
    supervisor = Recorder(supervisor_end)

    async def scenario() -> None:
        monkeypatch.setattr(task_runner, "SUPERVISOR_COMMS", await _decoder(runner_end), raising=False)
        first = asyncio.ensure_future(compat.aset_xcom("azbatch_watch_state", {"offset": 1}, **WHERE))
        await _received(supervisor)
        last = asyncio.ensure_future(compat.aset_xcom("azbatch_watch_state", {"offset": 2}, **WHERE))
        try:
            await _received(supervisor)
        finally:  # every request answered, so that no worker thread waits for ever
            supervisor.answer_all()
        await asyncio.wait_for(asyncio.gather(first, last), 30)

    asyncio.run(scenario())
    assert [json.loads(value) if isinstance(value, str) else value for value in supervisor.values] == [
        {"offset": 1},
        {"offset": 2},
    ]
