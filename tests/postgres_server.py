"""A throwaway PostgreSQL server for the tests (loaded by ``tests/conftest.py`` as
``postgres_server``).

Debian's ``postgresql`` package provides the server binaries (``/usr/lib/postgresql/N/bin``);
``initdb`` makes a cluster in a temporary folder owned by the ``postgres`` OS user (``initdb``
refuses to run as root, so as root it runs through ``runuser -u postgres``), trusting local
connections for the user ``test``, and ``pg_ctl`` starts it on a free loopback port with its
socket in the same folder. :func:`unavailable` says in one line why none can be started.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path
from types import TracebackType

__all__ = ["PostgresServer", "unavailable"]

USER = "test"


def _bin_dir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


def unavailable() -> str | None:
    """Why no server can be started here (one line), or None."""
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError:
        return "psycopg not installed (pip install -e '.[postgres]')"
    if _bin_dir() is None:
        return "no PostgreSQL server (/usr/lib/postgresql/*/bin/initdb; apt install postgresql)"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root without runuser (initdb refuses root)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresServer:
    """``with PostgresServer() as server:`` a running server; ``server.new_database()`` gives
    the URL of a fresh, empty database; ``halt()`` and ``resume()`` stop and start it again
    (same port, same data) for the fault tests.

    Args:
        settings: extra server settings (``-c name=value``), e.g. for one test's own server.
    """

    def __init__(self, settings: dict[str, str] | None = None) -> None:
        bin_dir = _bin_dir()
        if bin_dir is None:
            raise RuntimeError("no PostgreSQL server binaries")
        self._bin = bin_dir
        self.dir = Path(tempfile.mkdtemp(prefix="harness-pg-"))
        self.port = _free_port()
        self._settings = dict(settings or {})
        self._started = False

    @property
    def data(self) -> Path:
        return self.dir / "data"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    def _run(self, *args: str) -> None:
        cmd = [str(self._bin / args[0]), *args[1:]]
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{args[0]} failed ({done.returncode}): {done.stderr.strip()}")

    def start(self) -> None:
        self.data.mkdir()
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
            shutil.chown(self.data, "postgres", "postgres")
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", USER, "--no-sync")
        self.resume()

    def resume(self) -> None:
        """Start the server (again, after :meth:`halt`); returns once it accepts connections."""
        settings = {
            "fsync": "off",
            "synchronous_commit": "off",
            "full_page_writes": "off",
            "max_connections": "200",
            **self._settings,
        }
        options = f"-k {self.dir} -p {self.port} -c listen_addresses=127.0.0.1"
        options += "".join(f" -c {name}={value}" for name, value in settings.items())
        log = self.dir / "server.log"
        self._run("pg_ctl", "-D", str(self.data), "-l", str(log), "-o", options, "-w", "start")
        self._started = True

    def halt(self, mode: str = "fast") -> None:
        """Stop the server, keeping its data: ``fast`` disconnects every client and rolls
        back their open transactions; ``immediate`` is a crash (recovery at the next start)."""
        self._started = False
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def stop(self) -> None:
        if self._started:
            self.halt("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)

    def new_database(self) -> str:
        """Create an empty database; returns its URL."""
        import psycopg

        name = "t_" + uuid.uuid4().hex[:16]
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def __enter__(self) -> PostgresServer:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
