"""A real SFTP server for the run storage tests: Debian's OpenSSH ``sshd`` (package ``openssh-server``) on a free
loopback port, run as the current user with a host key and a client key generated in a temporary folder (public
keys only, no password, its built-in SFTP server), the host key pinned in a ``known_hosts`` the client checks."""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import signal
import socket
import subprocess
from pathlib import Path
from typing import Any

from tests.worker.cluster import free_port, wait_for

SSHD = Path("/usr/sbin/sshd")


def sshd_missing() -> str | None:
    """Why no sshd can run here (None: it can)."""
    if not SSHD.is_file():
        return f"{SSHD} is not installed (Debian: apt-get install openssh-server)"
    if shutil.which("ssh-keygen") is None:
        return "ssh-keygen is not installed (Debian: openssh-client)"
    return None


class SftpServer:
    """``sshd -D`` serving ``root`` (a folder of ``workdir``) over SFTP to the current user."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.user = getpass.getuser()
        self.root = workdir / "storage"
        self.client_key = workdir / "client_key"
        self.known_hosts = workdir / "known_hosts"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"sftp://{self.user}@127.0.0.1:{self.port}{self.root}"

    @property
    def options(self) -> dict[str, Any]:
        return {"client_keys": [str(self.client_key)], "known_hosts": str(self.known_hosts)}

    def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        host_key = self.workdir / "host_key"
        for key in (host_key, self.client_key):
            if not key.exists():
                subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        (self.workdir / "authorized_keys").write_text(self.client_key.with_suffix(".pub").read_text())
        kind, blob = host_key.with_suffix(".pub").read_text().split()[:2]
        self.known_hosts.write_text(f"[127.0.0.1]:{self.port} {kind} {blob}\n")
        config = self.workdir / "sshd_config"
        config.write_text(
            "\n".join(
                [
                    f"Port {self.port}",
                    "ListenAddress 127.0.0.1",
                    f"HostKey {host_key}",
                    f"PidFile {self.workdir / 'sshd.pid'}",
                    f"AuthorizedKeysFile {self.workdir / 'authorized_keys'}",
                    "PubkeyAuthentication yes",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "UsePAM no",
                    "StrictModes no",  # the temporary folder's modes are the test runner's
                    "PermitRootLogin prohibit-password",  # CI runs as root: keys only
                    "Subsystem sftp internal-sftp",
                    "LogLevel VERBOSE",
                    "",
                ]
            )
        )
        if os.geteuid() == 0:
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation folder, as root only
        log = (self.workdir / "sshd.log").open("ab")
        self.proc = subprocess.Popen(
            [str(SSHD), "-D", "-e", "-f", str(config)], stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()

        def listening() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"sshd exited {self.proc.returncode}: {self.log()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return True
            except OSError:
                return False

        wait_for(listening, 20, "sshd to listen")

    def log(self) -> str:
        path = self.workdir / "sshd.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def stop(self) -> None:
        """Stop the listener and every session it forked (sshd's sessions outlive their listener otherwise)."""
        if self.proc is not None and self.proc.poll() is None:
            sessions = _descendants(self.proc.pid)
            os.killpg(self.proc.pid, signal.SIGTERM)
            for pid in sessions:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            self.proc.wait(10)
        self.proc = None

    def __enter__(self) -> SftpServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _descendants(pid: int) -> list[int]:
    """The processes below ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out
