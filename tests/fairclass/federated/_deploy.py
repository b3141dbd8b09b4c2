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


class Deployment:
    """Start/stop a SuperLink and SuperNodes; run the app with ``flwr run``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "flwr-home"
        self.home.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        (self.home / "config.toml").write_text(
            '[superlink]\ndefault = "local-e2e"\n\n[superlink.local-e2e]\n'
            f'address = "127.0.0.1:{self.port}"\ninsecure = true\n'
        )
        self.env = dict(os.environ)
        self.env["PATH"] = f"{BIN}{os.pathsep}{self.env.get('PATH', '')}"
        self.env["PYTHONPATH"] = f"{SRC}{os.pathsep}{self.env.get('PYTHONPATH', '')}"
        self.env["FLWR_HOME"] = str(self.home)
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
        self._start(
            "superlink",
            [
                str(BIN / "flower-superlink"),
                "--insecure",
                "--port",
                str(self.port),
                "--disable-runtime-dependency-installation",
            ],
        )
        self.wait_for("superlink", "Application startup complete", 120.0)

    def start_supernode(self, name: str, config: Mapping[str, Any]) -> None:
        self._start(
            name,
            [
                str(BIN / "flower-supernode"),
                "--insecure",
                "--superlink",
                f"127.0.0.1:{self.port}",
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
