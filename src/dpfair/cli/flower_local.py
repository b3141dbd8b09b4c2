"""``dpfair fdp flower-local`` and ``dpfair fdp flower-app``: FDP-Fair on Flower, one machine.

``flower-local DIR --sites N`` runs the whole Flower deployment of FDP-Fair on localhost,
from the site files ``DIR/h1.csv … DIR/hN.csv`` that ``dpfair datasets simulate --sites N
--out DIR`` writes:

1. key pairs for the centre and every site (``DIR/flower-local/keys``, kept across runs),
   the centre's signed setup (each site's row count, ε, δ; the public feature box; α);
2. the Flower app directory (``flower-app``: its ``pyproject.toml`` only names the
   ServerApp and ClientApp of the installed dpfair);
3. one SuperLink and one SuperNode per site, each in its own process group with its own
   ``FLWR_HOME`` and its own free port (a second SuperNode on Flower's default port 9094
   would fail to start); ``insecure = true`` on localhost, or ``--tls``: a private CA and
   a certificate for ``localhost`` made with ``openssl`` (SuperLink TLS, SuperNodes and
   ``flwr`` pinning the CA);
4. ``flwr run … --stream``; then the released model must exist and verify with the
   centre's key, else the command fails (exit 1) with the ServerApp's error — ``flwr run``
   itself exits 0 when the ServerApp fails;
5. every process group is stopped (SIGTERM, then SIGKILL), and so is any process started
   under them that left its group (Flower's ``flower-superexec`` children), on success,
   failure or Ctrl-C.

Each run gets its own directory ``DIR/flower-local/run-K`` with the logs
(``superlink.log``, ``node-hN.log``, ``flwr-run.log``), the setup and ``released.json``.
The sites' privacy is charged as in any FDP-Fair run: to each site's own ledger (next to
its data file, ``hN.fdp-ledger``), capped by ``--max-epsilon``/``--max-delta`` (default:
one run's ε and δ, so a second run on the same files is refused until the cap is raised).

``flower-app OUT`` writes the Flower app directory for a real deployment (the same
``pyproject.toml`` as the repository's ``flower_app/``), so it ships with the package.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from dpfair._errors import InvalidParameterError
from dpfair.cli._support import user_errors

__all__ = [
    "FLOWER_APP_PYPROJECT",
    "FlowerRunError",
    "LocalFlower",
    "free_port",
    "node_config_arg",
    "register",
    "write_flower_app",
]

#: The Flower app: it ships no code, it names the ServerApp and ClientApp of the dpfair
#: installed by each party. Kept equal to ``flower_app/pyproject.toml`` (a test checks).
FLOWER_APP_PYPROJECT = """\
# The Flower app of FDP-Fair: `flwr run flower_app <superlink-connection> --run-config ...`.
# It ships no code: the ServerApp and ClientApp are those of the dpfair installed at the
# coordinator and at each site (`pip install 'dpfair[flower]'`), so every party runs code it
# installed itself. `dpfair fdp flower-app DIR` writes this directory; `dpfair fdp
# flower-local` runs a whole deployment on one machine. See docs/flower.md.

[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "dpfair-fdp"
version = "0.1.0"
description = "FDP-Fair (federated DP fair classification) as a Flower app"
license = "MIT"
# Installed by each party beforehand (run SuperLink with
# --disable-runtime-dependency-installation; SuperNodes do not install by default).
dependencies = ["dpfair[flower]"]

[tool.flwr.app]
publisher = "dpfair"

[tool.flwr.app.components]
serverapp = "dpfair.fairclass.federated.flower.server_app:app"
clientapp = "dpfair.fairclass.federated.flower.client_app:app"

# Centre settings; override with
# --run-config 'setup="/abs/setup.json" key="/abs/centre.key" out="/abs/released.json"'.
[tool.flwr.app.config]
setup = ""            # the signed setup of `dpfair fdp centre setup` (absolute path)
key = ""              # the centre's private key, which signed the setup (absolute path)
out = ""              # where the signed released_model is written (absolute path)
round-timeout = 600.0 # per round; round 1 includes the sites' SuperNodes connecting
seed = -1             # tie-break salt of the released classifier; -1: OS entropy
"""

_CONNECTION = "local"
_FAILED = "FDP-Fair run failed"


class FlowerRunError(RuntimeError):
    """The local Flower deployment did not release a model (the message says why)."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _toml(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string: quotes and backslashes escaped
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def node_config_arg(config: Mapping[str, Any]) -> str:
    """A ``--node-config``/``--run-config`` value: ``key=value`` pairs, TOML values."""
    return " ".join(f"{k}={_toml(v)}" for k, v in config.items())


def write_flower_app(out: Path) -> Path:
    """Write the Flower app directory (``pyproject.toml``) into ``out``; return ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "pyproject.toml").write_text(FLOWER_APP_PYPROJECT, encoding="utf-8")
    return out


def _flower_bin(name: str) -> str:
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        raise InvalidParameterError(
            f"{name!r} not found: install Flower with pip install 'dpfair[flower]' (in the "
            "environment that runs dpfair)."
        )
    return found


def _descendants(roots: set[int]) -> set[int]:
    """Every live process descended from ``roots`` (Linux ``/proc``; else empty)."""
    parent: dict[int, int] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 1:
            parent[int(entry.name)] = int(fields[1])
    found: set[int] = set()
    frontier = set(roots)
    while frontier:
        children = {p for p, pp in parent.items() if pp in frontier and p not in found}
        found |= children
        frontier = children
    return found


def _signal(pids: set[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def make_tls(root: Path) -> dict[str, Path]:
    """A private CA and a SuperLink certificate for ``localhost`` (``openssl``)."""
    if shutil.which("openssl") is None:
        raise InvalidParameterError("--tls: needs the openssl command (or run without --tls).")
    root.mkdir(parents=True, exist_ok=True)

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=root, check=True, capture_output=True)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=fdp-ca",
        "-keyout", "ca.key", "-out", "ca.crt")
    run("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost",
        "-keyout", "server.key", "-out", "server.csr")
    (root / "san.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    run("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "2", "-out", "server.pem", "-extfile", "san.ext")
    return {"ca": root / "ca.crt", "cert": root / "server.pem", "key": root / "server.key"}


class LocalFlower:
    """A SuperLink and SuperNodes on localhost, each its own process group and FLWR_HOME.

    Use as a context manager: leaving it stops every process it started (and their
    descendants), whatever happened.
    """

    def __init__(self, root: Path, *, tls: Mapping[str, Path] | None = None) -> None:
        self.root = root.resolve()
        self.tls = tls
        self.port = free_port()
        self.address = f"{'localhost' if tls else '127.0.0.1'}:{self.port}"
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        import dpfair

        src = str(Path(dpfair.__file__).resolve().parents[1])  # the dpfair that runs this
        self.env = dict(os.environ)
        self.env["PYTHONPATH"] = os.pathsep.join(
            [src, *filter(None, [self.env.get("PYTHONPATH")])]
        )
        # Flower's processes start their helpers (flower-superexec) by name from PATH.
        bin_dir = str(Path(_flower_bin("flower-superlink")).parent)
        self.env["PATH"] = os.pathsep.join([bin_dir, *filter(None, [self.env.get("PATH")])])
        self.env.setdefault("FLWR_SUPEREXEC_TASK_POLL_INTERVAL", "0.1")
        self.home = self._home("flwr-run")  # flwr run's: the SuperLink connection
        security = f"root-certificates = {_toml(str(tls['ca']))}" if tls else "insecure = true"
        (self.home / "config.toml").write_text(
            f'[superlink]\ndefault = "{_CONNECTION}"\n\n[superlink.{_CONNECTION}]\n'
            f'address = "{self.address}"\n{security}\n'
        )

    def __enter__(self) -> LocalFlower:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _home(self, name: str) -> Path:
        home = self.root / "homes" / name
        home.mkdir(parents=True, exist_ok=True)
        return home

    def log_path(self, name: str) -> Path:
        return self.root / f"{name}.log"

    def log(self, name: str) -> str:
        path = self.log_path(name)
        return path.read_text(errors="replace") if path.exists() else ""

    def _start(self, name: str, cmd: list[str]) -> None:
        env = {**self.env, "FLWR_HOME": str(self._home(name))}
        with open(self.log_path(name), "wb") as log:
            self.procs[name] = subprocess.Popen(
                cmd, cwd=self.root, env=env, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )

    def wait_for(self, name: str, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.log(name):
            proc = self.procs[name]
            if proc.poll() is not None:
                raise FlowerRunError(
                    f"{name} exited with code {proc.returncode} before it was ready; see "
                    f"{self.log_path(name)}:\n{self.log(name)[-1500:]}"
                )
            if time.monotonic() > deadline:
                raise FlowerRunError(f"{name} not ready after {timeout:g} s; see "
                                     f"{self.log_path(name)}")
            time.sleep(0.1)

    def start_superlink(self, timeout: float = 120.0) -> None:
        security = ["--insecure"]
        if self.tls:
            security = ["--ssl-ca-certfile", str(self.tls["ca"]), "--ssl-certfile",
                        str(self.tls["cert"]), "--ssl-keyfile", str(self.tls["key"])]
        self._start("superlink", [
            _flower_bin("flower-superlink"), *security, "--port", str(self.port),
            "--disable-runtime-dependency-installation",
        ])
        self.wait_for("superlink", "Application startup complete", timeout)

    def start_supernode(self, name: str, config: Mapping[str, Any]) -> None:
        security = ["--root-certificates", str(self.tls["ca"])] if self.tls else ["--insecure"]
        self._start(name, [
            _flower_bin("flower-supernode"), *security, "--superlink", self.address,
            "--port", str(free_port()), "--node-config", node_config_arg(config),
        ])

    def flwr_run(self, app: Path, run_config: Mapping[str, Any], timeout: float) -> str:
        """``flwr run APP local --run-config … --stream``; its output (also in a log)."""
        self._start("flwr-run", [
            _flower_bin("flwr"), "run", str(app), _CONNECTION, "--run-config",
            node_config_arg(run_config), "--stream",
        ])
        proc = self.procs["flwr-run"]
        deadline = time.monotonic() + timeout
        while proc.poll() is None:
            for name, other in self.procs.items():
                if name != "flwr-run" and other.poll() is not None:
                    raise FlowerRunError(
                        f"{name} exited with code {other.returncode} during the run; see "
                        f"{self.log_path(name)}:\n{self.log(name)[-1500:]}"
                    )
            if time.monotonic() > deadline:
                raise FlowerRunError(f"flwr run did not end within {timeout:g} s; see "
                                     f"{self.log_path('flwr-run')}")
            time.sleep(0.2)
        return self.log("flwr-run")

    def stop(self, grace: float = 10.0) -> None:
        """Stop every process group started here, then any descendant that left it."""
        live = {p.pid for p in self.procs.values() if p.poll() is None}
        family = _descendants(live) if live else set()
        for proc in self.procs.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGTERM)
        _signal(family, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc in self.procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        for proc in self.procs.values():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # the group, even if its leader is gone
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
        _signal(family | _descendants(family), signal.SIGKILL)


def _failure(log: str) -> str | None:
    """The ServerApp's error line in a ``flwr run --stream`` log, if any."""
    for line in log.splitlines():
        if _FAILED in line:
            return line[line.index(_FAILED):].strip()
    return None


def _next_run_dir(base: Path) -> Path:
    base.mkdir(parents=True, exist_ok=True)
    k = 1
    while (base / f"run-{k}").exists():
        k += 1
    run = base / f"run-{k}"
    run.mkdir()
    return run


def _keys(keys_dir: Path, parties: list[str]) -> dict[str, tuple[Path, Path]]:
    """Each party's key pair, made once and reused (``keys_dir/NAME.key``, ``NAME.pub``)."""
    from dpfair.fairclass.federated import generate_keypair

    keys_dir.mkdir(parents=True, exist_ok=True)
    out = {}
    for p in parties:
        key, pub = keys_dir / f"{p}.key", keys_dir / f"{p}.pub"
        if not (key.exists() and pub.exists()):
            key, pub, _ = generate_keypair(keys_dir / p)
        out[p] = (key, pub)
    return out


def run_local(
    directory: Path,
    *,
    sites: int,
    epsilon: float,
    delta: float,
    alpha: float,
    features: list[str],
    target: str,
    sensitive: str,
    bounds: list[tuple[float, float]],
    max_epsilon: float | None = None,
    max_delta: float | None = None,
    round_timeout: float = 600.0,
    tls: bool = False,
    seed: int | None = None,
    progress: Any = None,
) -> dict[str, Any]:
    """Run FDP-Fair on a local Flower deployment; the summary (raises FlowerRunError)."""
    from dpfair.data import row_count
    from dpfair.fairclass.federated import (
        CENTRE,
        SiteSpec,
        load_public_key,
        load_signer,
        make_protocol,
        read_message,
        write_message,
    )

    say = progress or (lambda text: None)
    if sites < 1:
        raise InvalidParameterError(f"--sites={sites}: expected at least 1 site.")
    ids = [f"h{s + 1}" for s in range(sites)]
    files = {sid: directory / f"{sid}.csv" for sid in ids}
    missing = [str(f) for f in files.values() if not f.is_file()]
    if missing:
        raise InvalidParameterError(
            f"--sites {sites}: no site file {missing[0]!r}; make the files with dpfair "
            f"datasets simulate --sites {sites} --out {directory} (or put hN.csv there)."
        )
    base = directory.resolve() / "flower-local"
    keys = _keys(base / "keys", [CENTRE, *ids])
    run_dir = _next_run_dir(base)
    say(f"run directory {run_dir}")
    signer = load_signer(keys[CENTRE][0], CENTRE, option="centre key")
    pinned = {p: load_public_key(k[1], option=f"key of {p}") for p, k in keys.items()}
    cfg = make_protocol(
        [SiteSpec(sid, row_count(files[sid]), epsilon, delta) for sid in ids],
        feature_bounds=bounds, alpha=alpha, keys=pinned,
    )
    setup = write_message(run_dir / "setup.json", cfg.to_envelope(), signer)
    app = write_flower_app(run_dir / "flower-app")
    certs = make_tls(run_dir / "tls") if tls else None
    out = run_dir / "released.json"
    with LocalFlower(run_dir, tls=certs) as flower:
        say(f"SuperLink on {flower.address} ({'TLS' if tls else 'insecure, localhost only'})")
        flower.start_superlink()
        for sid in ids:
            node = {
                "site-id": sid, "data": str(files[sid].resolve()),
                "features": ",".join(features), "target": target, "sensitive": sensitive,
                "key": str(keys[sid][0].resolve()), "centre-key": str(keys[CENTRE][1].resolve()),
                "max-epsilon": float(epsilon if max_epsilon is None else max_epsilon),
                "max-delta": float(delta if max_delta is None else max_delta),
            }
            if seed is not None:
                node["seed"] = int(seed) + 1 + ids.index(sid)
            flower.start_supernode(f"node-{sid}", node)
        say(f"{sites} SuperNodes started; flwr run")
        conf: dict[str, Any] = {
            "setup": str(Path(setup).resolve()), "key": str(keys[CENTRE][0].resolve()),
            "out": str(out.resolve()), "round-timeout": float(round_timeout),
        }
        if seed is not None:
            conf["seed"] = int(seed)
        log = flower.flwr_run(app, conf, timeout=2 * round_timeout + 300.0)
    error = _failure(log)
    if error is not None or not out.exists():
        tail = "\n".join(log.strip().splitlines()[-8:])
        why = error or (
            f"flwr run ended without writing {out} and without a ServerApp error; its last "
            f"lines:\n{tail}\n"
        )
        raise FlowerRunError(f"{why.rstrip().rstrip('.')}; logs in {run_dir}")
    released = read_message(out, keys={CENTRE: pinned[CENTRE]}, kind="released_model")
    return {
        "released_model": str(out),
        "verified_with": str(keys[CENTRE][1]),
        "protocol_id": released.protocol_id,
        "sites": {sid: {"rows": cfg_site.n, "epsilon": cfg_site.epsilon,
                        "delta": cfg_site.delta}
                  for sid, cfg_site in zip(ids, cfg.sites, strict=True)},
        "transport": "TLS (private CA)" if tls else "insecure (localhost)",
        "logs": str(run_dir),
        "predict": (f"dpfair fdp predict {out} TEST.csv --centre-key {keys[CENTRE][1]} "
                    f"--features {','.join(features)} --sensitive {sensitive} "
                    f"--target {target}"),
    }


@contextlib.contextmanager
def _run_errors() -> Iterator[None]:
    try:
        yield
    except FlowerRunError as exc:
        typer.echo(f"dpfair: error: the Flower run failed: {exc}", err=True)
        raise typer.Exit(1) from None


def register(fdp: typer.Typer) -> None:
    """Add ``flower-local`` and ``flower-app`` to the ``fdp`` group."""

    @fdp.command("flower-local")
    def flower_local(
        directory: Annotated[
            Path, typer.Argument(help="Folder with the site files h1.csv … hN.csv.")
        ],
        sites: Annotated[int, typer.Option("--sites", help="Number of sites N.")] = 3,
        epsilon: Annotated[float, typer.Option("--epsilon", help="Each site's ε.")] = 1.0,
        delta: Annotated[float, typer.Option("--delta", help="Each site's δ.")] = 1e-6,
        alpha: Annotated[float, typer.Option("--alpha", help="Disparity cap α.")] = 0.1,
        features: Annotated[
            str, typer.Option("--features", help="Comma-separated feature columns.")
        ] = "x1,x2",
        target: Annotated[str, typer.Option("--target", help="Label column (0/1).")] = "y",
        sensitive: Annotated[
            str, typer.Option("--sensitive", help="Group column (0/1).")
        ] = "a",
        bounds: Annotated[
            list[float] | None,
            typer.Option("--bounds", help="Public LO HI per feature, repeat (default 0 1 each)."),
        ] = None,
        max_epsilon: Annotated[
            float | None,
            typer.Option("--max-epsilon", help="Each site's own ε cap (default: one run's ε)."),
        ] = None,
        max_delta: Annotated[
            float | None,
            typer.Option("--max-delta", help="Each site's own δ cap (default: one run's δ)."),
        ] = None,
        round_timeout: Annotated[
            float, typer.Option("--round-timeout", help="Seconds per round.")
        ] = 600.0,
        tls: Annotated[
            bool,
            typer.Option("--tls/--insecure",
                         help="TLS with a private CA made by openssl (default: insecure, "
                              "localhost only)."),
        ] = False,
        seed: Annotated[
            int | None,
            typer.Option("--seed", help="Tests/studies only: reproducible noise."),
        ] = None,
    ) -> None:
        """FDP-Fair on Flower on this machine: SuperLink, one SuperNode per site, flwr run."""
        with user_errors(), _run_errors():
            names = [f.strip() for f in features.split(",") if f.strip()]
            values = list(bounds) if bounds else [0.0, 1.0] * len(names)
            if len(values) != 2 * len(names):
                raise InvalidParameterError(
                    f"--bounds: give LO HI for each of the {len(names)} features "
                    f"({', '.join(names)}), e.g. --bounds 0 --bounds 1 per feature."
                )
            if seed is not None:
                typer.echo("dpfair: warning: --seed makes the noise reproducible by anyone "
                           "who knows it; for tests and studies only.", err=True)
            summary = run_local(
                directory, sites=sites, epsilon=epsilon, delta=delta, alpha=alpha,
                features=names, target=target, sensitive=sensitive,
                bounds=[(values[i], values[i + 1]) for i in range(0, len(values), 2)],
                max_epsilon=max_epsilon, max_delta=max_delta, round_timeout=round_timeout,
                tls=tls, seed=seed, progress=lambda t: typer.echo(f"dpfair: {t}", err=True),
            )
            typer.echo(json.dumps(summary, indent=2))

    @fdp.command("flower-app")
    def flower_app(
        out: Annotated[Path, typer.Argument(help="Directory to write the Flower app into.")],
    ) -> None:
        """Write the Flower app directory (pyproject.toml naming dpfair's apps) for flwr run."""
        with user_errors():
            path = write_flower_app(out)
            typer.echo(json.dumps({"flower_app": str(path / "pyproject.toml")}, indent=2))
