"""What a trigger asks the triggerer once it is cancelled (its task instance's state: how it tells a kill from a
restart before Airflow 3.3) reaches the supervisor and comes back on every line, through the line's own
``TriggerCommsDecoder`` and a supervisor answering on the other end of a socket pair, even when the trigger is
cancelled again while it waits: on 3.0 and 3.1 a request cancelled before its reply leaves that reply to the next
request, which then fails (the triggerer process dies of it); ``compat.to_reply`` runs the request to its reply."""

from __future__ import annotations

import asyncio
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

    def _read(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            if not chunk:
                raise EOFError
            data += chunk
        return data

    def _serve(self) -> None:
        decoder = msgspec.msgpack.Decoder(_RequestFrame)
        try:
            while self.states:
                length = int.from_bytes(self._read(4), "big")
                request = decoder.decode(self._read(length))
                self.received.release()
                self.answer.acquire()
                body: dict[str, Any] = {"task_states": {"r": {"t": self.states.pop(0)}}, "type": "TaskStatesResult"}
                self.sock.sendall(_ResponseFrame(id=request.id, body=body).as_bytes())
        except (EOFError, OSError):
            return


async def _decoder(sock: socket.socket) -> TriggerCommsDecoder:
    reader, writer = await asyncio.open_connection(sock=sock)
    extra = {"socket": sock} if "socket" in attrs.fields_dict(TriggerCommsDecoder) else {}
    decoder = TriggerCommsDecoder(async_reader=reader, async_writer=writer, **extra)
    start_reader = getattr(decoder, "start_reader", None)
    if start_reader is not None:  # 3.2+: replies are read by a reader task of the decoder's own
        await start_reader()
    return decoder


async def _received(supervisor: Supervisor) -> None:
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
