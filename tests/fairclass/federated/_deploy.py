"""A real Flower deployment on localhost: one SuperLink, one SuperNode per site, ``flwr run``.

Every party is its own process (group), started with the venv's Flower console scripts and
this checkout's ``src`` on ``PYTHONPATH``; logs go to files in the work directory. Used by
``test_flower_deploy.py`` and ``benchmarks/fdp_flower_bench.py``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import dpfair

BIN = Path(sys.executable).parent
SRC = Path(dpfair.__file__).resolve().parents[1]
APP_DIR = SRC.parent / "flower_app"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _quote(v: Any) -> str:
    return f'"{v}"' if isinstance(v, str) else repr(v)


def node_config_arg(config: Mapping[str, Any]) -> str:
    """``--node-config`` value: space-separated key=value, strings quoted (TOML values)."""
    return " ".join(f"{k}={_quote(v)}" for k, v in config.items())


def make_tls(root: Path) -> dict[str, Path]:
    """A private CA and a SuperLink certificate for ``localhost`` (README's openssl calls)."""
    root.mkdir(parents=True, exist_ok=True)
    run = {"cwd": root, "check": True, "capture_output": True}
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=fdp-ca",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
        ],
        **run,
    )
    subprocess.run(
        [
            "openssl",
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=localhost",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
        ],
        **run,
    )
    (root / "san.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    subprocess.run(
        [
            "openssl",
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-out",
            "server.pem",
            "-extfile",
            "san.ext",
        ],
        **run,
    )
    return {
        n: root / f for n, f in (("ca", "ca.crt"), ("cert", "server.pem"), ("key", "server.key"))
    }


class Deployment:
    """Start/stop a SuperLink and SuperNodes; run the app with ``flwr run``.

    ``tls``: the certificates of :func:`make_tls`; then the SuperLink runs with TLS and
    SuperNode authentication, and SuperNodes must be registered (:meth:`register`).
    """

    def __init__(
        self,
        root: Path,
        tls: Mapping[str, Path] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.root = root
        self.tls = tls
        self.home = root / "flwr-home"
        self.home.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.address = f"{'localhost' if tls else '127.0.0.1'}:{self.port}"
        security = f'root-certificates = "{tls["ca"]}"' if tls else "insecure = true"
        (self.home / "config.toml").write_text(
            '[superlink]\ndefault = "local-e2e"\n\n[superlink.local-e2e]\n'
            f'address = "{self.address}"\n{security}\n'
        )
        self.env = dict(os.environ)
        self.env["PATH"] = f"{BIN}{os.pathsep}{self.env.get('PATH', '')}"
        self.env["PYTHONPATH"] = f"{SRC}{os.pathsep}{self.env.get('PYTHONPATH', '')}"
        self.env["FLWR_HOME"] = str(self.home)
        self.env.update(env or {})
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def _start(self, name: str, cmd: list[str]) -> subprocess.Popen[bytes]:
        log = open(self.root / f"{name}.log", "wb")
        proc = subprocess.Popen(
            cmd,
            cwd=self.root,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # own process group: kill it with its ClientApp children
        )
        self.procs[name] = proc
        return proc

    def log(self, name: str) -> str:
        path = self.root / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def start_superlink(self) -> None:
        security = ["--insecure"]
        if self.tls:
            security = [
                "--ssl-ca-certfile",
                str(self.tls["ca"]),
                "--ssl-certfile",
                str(self.tls["cert"]),
                "--ssl-keyfile",
                str(self.tls["key"]),
                "--enable-supernode-auth",
            ]
        self._start(
            "superlink",
            [
                str(BIN / "flower-superlink"),
                *security,
                "--port",
                str(self.port),
                "--disable-runtime-dependency-installation",
            ],
        )
        self.wait_for("superlink", "Application startup complete", 120.0)

    def register(self, public_key: Path, name: str) -> None:
        """``flwr supernode register KEY local-e2e --name NAME`` (SuperNode authentication)."""
        res = subprocess.run(
            [
                str(BIN / "flwr"),
                "supernode",
                "register",
                str(public_key),
                "local-e2e",
                "--name",
                name,
            ],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if res.returncode:
            raise RuntimeError(f"register {name}: {res.stdout}{res.stderr}")

    def start_supernode(
        self, name: str, config: Mapping[str, Any], *, auth_key: Path | None = None
    ) -> None:
        security = ["--insecure"]
        if self.tls:
            security = ["--root-certificates", str(self.tls["ca"])]
            if auth_key is not None:
                security += ["--auth-supernode-private-key", str(auth_key)]
        self._start(
            name,
            [
                str(BIN / "flower-supernode"),
                *security,
                "--superlink",
                self.address,
                "--port",
                str(free_port()),
                "--node-config",
                node_config_arg(config),
            ],
        )

    def wait_for(self, name: str, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.log(name):
            proc = self.procs[name]
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited ({proc.returncode}):\n{self.log(name)[-3000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{name}: no {text!r} after {timeout} s:\n{self.log(name)[-3000:]}"
                )
            time.sleep(0.1)

    def flwr_run(self, run_config: Mapping[str, Any], *, timeout: float) -> subprocess.Popen[str]:
        """``flwr run flower_app local-e2e --run-config … --stream`` (returns the process)."""
        cmd = [
            str(BIN / "flwr"),
            "run",
            str(APP_DIR),
            "local-e2e",
            "--run-config",
            node_config_arg(run_config),
            "--stream",
        ]
        return subprocess.Popen(
            cmd,
            cwd=self.root,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )

    def kill(self, name: str) -> None:
        proc = self.procs[name]
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)

    def stop(self) -> None:
        for name in list(self.procs):
            proc = self.procs[name]
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for name in list(self.procs):
            try:
                self.procs[name].wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill(name)
