"""Fixtures of the Python client's tests: real `shardplan serve` processes.

Each test session starts build/rel/shardplan (or $SHARDPLAN_BIN) on
127.0.0.1 with port 0 (the kernel picks a free port; the server prints the
one it bound) and a fresh SQLite file in a temporary folder: one server
with auth off (loopback's default) and one with `--auth on` and an admin
token made with `shardplan token create` before it starts. The request log
and stderr go to files, so nothing blocks on a full pipe. `make
test-python` builds the binary and runs these with PYTHONPATH=clients/python.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator, List, Optional

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "clients" / "python"))

import shardplan  # noqa: E402

BIN = Path(os.environ.get("SHARDPLAN_BIN", ROOT / "build" / "rel" / "shardplan")).resolve()
EXAMPLES = ROOT / "examples"


class Server:
    """A running `shardplan serve` with its URL, database and logs."""

    def __init__(self, tmp: Path, extra: List[str], env_extra: Optional[dict] = None) -> None:
        self.tmp = tmp
        self.db = tmp / "shardplan.db"
        self.err_path = tmp / "server.err"
        self.log_path = tmp / "requests.log"
        self.extra = extra
        self.env_extra = env_extra or {}
        self.proc: Optional[subprocess.Popen] = None
        self.url = ""

    def token(self, scope: str, label: str = "test") -> str:
        """A token made with `shardplan token create` on this server's database."""
        out = subprocess.run(
            [str(BIN), "token", "create", "--scope", scope, "--label", label, "--db", str(self.db)],
            check=True, capture_output=True, text=True, timeout=30,
        ).stdout
        m = re.search(r"\bspt_[0-9a-f]+", out)
        assert m, f"no token in: {out!r}"
        return m.group(0)

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SHARDPLAN_")}
        env.update(self.env_extra)
        cmd = [str(BIN), "serve", "--listen", "127.0.0.1:0", "--db", str(self.db),
               "--log", str(self.log_path), "--drain", "5", *self.extra]
        with open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env,
                                         cwd=str(self.tmp))
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            text = self.err_path.read_text(errors="replace")
            m = re.search(r"listening on (http://127\.0\.0\.1:\d+)/", text)
            if m:
                self.url = m.group(1)
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"shardplan serve exited {self.proc.returncode}:\n{text}")
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("shardplan serve did not report its port:\n" +
                           self.err_path.read_text(errors="replace"))

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _need_binary() -> None:
    if not BIN.exists():
        pytest.exit(f"{BIN} is missing: run `make {BIN.relative_to(ROOT)}` (make test-python does)",
                    returncode=2)


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server with auth off (loopback's default)."""
    _need_binary()
    s = Server(tmp_path_factory.mktemp("open"), [])
    s.start()
    yield s
    s.stop()
    assert s.proc is not None and s.proc.returncode == 0, s.err_path.read_text()


@pytest.fixture(scope="session")
def auth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server with --auth on; its admin token is in .admin."""
    _need_binary()
    s = Server(tmp_path_factory.mktemp("auth"), ["--auth", "on"])
    s.admin = s.token("admin", "admin")  # type: ignore[attr-defined]
    s.start()
    yield s
    s.stop()


@pytest.fixture(scope="session")
def client(server: Server) -> shardplan.Client:
    return shardplan.Client(server.url)


@pytest.fixture(scope="session")
def mlp_json() -> dict:
    import json

    return json.loads((EXAMPLES / "flax_mlp.json").read_text())


@pytest.fixture(scope="session")
def mlp_mlir() -> str:
    return (EXAMPLES / "flax_mlp.mlir").read_text()


@pytest.fixture(scope="session")
def mlp_plan(client: shardplan.Client, mlp_json: dict) -> shardplan.Plan:
    """The Flax MLP graph document, planned."""
    return client.plan(mlp_json)


class FakeLowered:
    """What jax.jit(f).lower(x) returns, as far as the client cares: as_text() gives MLIR."""

    def __init__(self, text: str) -> None:
        self._text = text
        self.calls = 0

    def as_text(self) -> str:
        self.calls += 1
        return self._text
