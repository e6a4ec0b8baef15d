"""A throwaway PostgreSQL cluster for the tests: initdb + pg_ctl in a temp dir.

The server listens on a free loopback port with its unix socket inside the temp
dir, runs as the ``postgres`` system user when we are root (PostgreSQL refuses
to run as root), and is stopped and removed afterwards. ``fsync=off`` keeps the
suite fast: the tests kill clients, never the server. ``durable=True`` keeps the
server's defaults (fsync, full page writes) for benchmarks of the durable mode.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def find_bin() -> Path | None:
    """The directory holding initdb and pg_ctl (``PG_BIN`` overrides the search)."""
    candidates = [os.environ.get("PG_BIN", "")]
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    candidates += [str(Path(p).parent) for p in (shutil.which("initdb"),) if p]
    for c in candidates:
        if c and (Path(c) / "initdb").exists() and (Path(c) / "pg_ctl").exists():
            return Path(c)
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PgServer:
    def __init__(self, bindir: Path, *, durable: bool = False,
                 max_connections: int = 100, settings: dict[str, str] | None = None) -> None:
        self.bindir = bindir
        self.durable = durable
        self.max_connections = max_connections
        self.settings = dict(settings or {})  # more server settings (-c name=value)
        self.root = Path(tempfile.mkdtemp(prefix="convlog-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self.user: str | None = None
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")  # KeyError: no such user (reported by the fixture)
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
            self.user = "postgres"

    def _run(self, *args: str, timeout: float = 60) -> None:
        done = subprocess.run(args, user=self.user, capture_output=True, text=True,
                              timeout=timeout, check=False, cwd=self.root)
        if done.returncode != 0:
            log = self.root / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"{' '.join(args)} failed ({done.returncode}):\n"
                               f"{done.stdout}{done.stderr}{tail}")

    def start(self) -> PgServer:
        self._run(str(self.bindir / "initdb"), "-D", str(self.data), "-U", "postgres",
                  "-A", "trust", "-E", "UTF8", "--no-sync", "--no-instructions")
        return self._pg_ctl_start()

    def _pg_ctl_start(self) -> PgServer:
        opts = (f"-c listen_addresses=127.0.0.1 -p {self.port} "
                f"-c unix_socket_directories={self.root} "
                f"-c max_connections={self.max_connections}")
        if not self.durable:
            opts += " -c fsync=off -c full_page_writes=off"
        opts += "".join(f" -c {k}={v}" for k, v in self.settings.items())
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l",
                  str(self.root / "server.log"), "-o", opts, "-w", "-t", "60", "start")
        return self

    def crash(self) -> None:
        """Kill the server as a crash would (immediate shutdown: no checkpoint, and
        WAL not yet written out of the server's buffers is lost); ``restart`` runs
        crash recovery. The operating system keeps what was written, so with
        ``fsync=off`` only what the server had not written yet is lost."""
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate",
                  "-w", "stop")

    def restart(self) -> PgServer:
        return self._pg_ctl_start()

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def stop(self) -> None:
        with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
            self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate",
                      "-w", "stop")
        for _ in range(20):
            try:
                shutil.rmtree(self.root)
                return
            except OSError:
                time.sleep(0.1)
