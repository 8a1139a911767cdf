"""A StatsD server on loopback that keeps what it receives, for tests of the metrics Airflow sends."""

from __future__ import annotations

import contextlib
import socket
import threading


class StatsdServer:
    def __init__(self) -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._socket.bind(("127.0.0.1", 0))
        self.port: int = self._socket.getsockname()[1]
        self.packets: list[str] = []
        self._thread = threading.Thread(target=self._receive, name="statsd-server", daemon=True)
        self._thread.start()

    @property
    def airflow_env(self) -> dict[str, str]:
        """Airflow's [metrics] options that send its metrics here."""
        return {
            "AIRFLOW__METRICS__STATSD_ON": "True",
            "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
            "AIRFLOW__METRICS__STATSD_PORT": str(self.port),
            "AIRFLOW__METRICS__STATSD_PREFIX": "airflow",
        }

    def _receive(self) -> None:
        with contextlib.suppress(OSError):  # closed
            while True:
                data = self._socket.recv(65536)
                # One datagram may hold several metrics, one a line.
                self.packets.extend(data.decode(errors="replace").splitlines())

    def count(self, name: str) -> int:
        """How many times the counter ``name`` (with the prefix) was incremented."""
        total = 0
        for packet in list(self.packets):
            metric, _, rest = packet.partition(":")
            value, _, kind = rest.partition("|")
            if metric == name and kind.startswith("c"):
                total += int(value)
        return total

    def close(self) -> None:
        self._socket.close()
