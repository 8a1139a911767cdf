"""A throwaway PostgreSQL server for a test deployment: ``initdb`` in a temporary directory, ``postgres`` on a
free loopback port (TCP only, no Unix socket), removed when the block ends.

Airflow needs PostgreSQL (or MySQL) for more than one scheduler or triggerer: they share work through row
locks (``SELECT ... FOR UPDATE SKIP LOCKED``), which SQLite has not. The server is the distribution's
(Debian's ``postgresql`` package puts it in ``/usr/lib/postgresql/<version>/bin``). PostgreSQL refuses to run
as root, so as root the server runs as the ``postgres`` user the package creates (or ``nobody``).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.helpers import wait_until

# Durability is not what a throwaway test database is for: no fsync, no waiting for the WAL.
SERVER_SETTINGS = {
    "listen_addresses": "127.0.0.1",
    "unix_socket_directories": "",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    # Every Airflow process keeps a pool of connections (5, up to 15 each).
    "max_connections": "300",
    # A triggerer frozen in the middle of a transaction (the test's SIGSTOP; a stalled host) keeps its row locks:
    # the triggerer that took its triggers over blocks on the same task's checkpoint XCom, and with that request
    # its whole supervisor (Airflow serves a triggerer's execution API in it), so every trigger it runs stalls.
    # The server ends such a transaction instead (docs/howto/several-triggerers.md): before the others take the
    # frozen one's triggers over (the health-check threshold, 30 s), but not sooner than it must, as a busy
    # triggerer can leave a transaction idle for 10 s and more (and exits when the server ends it).
    "idle_in_transaction_session_timeout": "20s",
}


def postgres_bin_dir() -> Path | None:
    """Where ``initdb`` and ``postgres`` are: the newest of the distribution's versions, or ``PATH``."""
    versions = sorted(
        (path for path in Path("/usr/lib/postgresql").glob("*/bin") if (path / "postgres").exists()),
        key=lambda path: [int(part) for part in path.parent.name.split(".") if part.isdigit()],
    )
    if versions:
        return versions[-1]
    found = shutil.which("postgres")
    if found and shutil.which("initdb"):
        return Path(found).parent
    return None


@dataclass(frozen=True)
class PostgresServer:
    url: str  # SQLAlchemy URL of the ``airflow`` database
    port: int
    data_dir: Path


def _server_user() -> pwd.struct_passwd | None:
    """The user the server runs as: None (ourselves) unless we are root, which PostgreSQL refuses."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    raise RuntimeError("running as root, and neither a 'postgres' nor a 'nobody' user exists to run PostgreSQL")


@contextlib.contextmanager
def run_postgres(bin_dir: Path, port: int) -> Iterator[PostgresServer]:
    user = _server_user()
    as_user = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []} if user else {}
    # Directly under the temporary directory: the server's user must reach it (pytest's are root's alone).
    data_dir = Path(tempfile.mkdtemp(prefix="azbatch-postgres-"))
    if user:
        os.chown(data_dir, user.pw_uid, user.pw_gid)
    env = {"PATH": os.environ.get("PATH", ""), "LC_ALL": "C.UTF-8", "TZ": "UTC"}
    try:
        subprocess.run(
            [bin_dir / "initdb", "-D", data_dir, "-U", "airflow", "-A", "trust", "-E", "UTF8", "--no-sync"],
            env=env,
            check=True,
            capture_output=True,
            cwd=data_dir,
            **as_user,  # type: ignore[arg-type]
        )
        settings = [arg for name, value in SERVER_SETTINGS.items() for arg in ("-c", f"{name}={value}")]
        log = open(data_dir / "server.log", "ab")  # noqa: SIM115 - kept open for the server's life
        server = subprocess.Popen(
            [bin_dir / "postgres", "-D", data_dir, "-p", str(port), *settings],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=data_dir,
            start_new_session=True,
            **as_user,  # type: ignore[arg-type]
        )
        try:
            import psycopg2

            def connect() -> bool:
                if server.poll() is not None:
                    raise RuntimeError(f"PostgreSQL exited: {(data_dir / 'server.log').read_text()[-3000:]}")
                try:
                    psycopg2.connect(host="127.0.0.1", port=port, user="airflow", dbname="postgres").close()
                except psycopg2.OperationalError:
                    return False
                return True

            wait_until(connect, timeout=60, interval=0.2, what="PostgreSQL accepting connections")
            admin = psycopg2.connect(host="127.0.0.1", port=port, user="airflow", dbname="postgres")
            admin.autocommit = True
            with admin.cursor() as cursor:
                cursor.execute("CREATE DATABASE airflow")
            admin.close()
            yield PostgresServer(f"postgresql+psycopg2://airflow@127.0.0.1:{port}/airflow", port, data_dir)
        finally:
            # SIGINT is the "fast" shutdown: sessions are ended, nothing is waited for.
            with contextlib.suppress(ProcessLookupError):
                server.send_signal(signal.SIGINT)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(server.pid, signal.SIGKILL)
                server.wait()
            log.close()
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
