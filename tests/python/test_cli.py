"""The shardplan-py command line, in process and as `python -m shardplan`, and the packaging."""

from __future__ import annotations

import ast
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import List, Tuple

import pytest

import shardplan
from shardplan import cli
from conftest import EXAMPLES, ROOT, Server

PKG = ROOT / "clients" / "python"


def run(server: Server, *args: str, stdin: str = "") -> Tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    old = sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        rc = cli.main(["--server", server.url, *args], out=out, errs=err)
    finally:
        sys.stdin = old
    return rc, out.getvalue(), err.getvalue()


def test_help_and_usage(capsys: pytest.CaptureFixture) -> None:
    assert cli.main(["--help"]) == 0
    text = capsys.readouterr().out
    for command in ("submit", "plan", "get", "list", "put", "delete", "compare", "bench", "health",
                    "lint", "collectives", "cost", "suggest", "whatif", "sweep", "cancel", "token"):
        assert command in text, f"--help does not mention {command}"
    assert cli.main(["plan", "--help"]) == 0
    assert "--graph-id" in capsys.readouterr().out
    assert cli.main(["--version"]) == 0
    assert "0.1.0" in capsys.readouterr().out
    err = io.StringIO()
    assert cli.main([], errs=err) == 2
    env = os.environ.pop("SHARDPLAN_SERVER", None)
    try:
        err = io.StringIO()
        assert cli.main(["health"], errs=err) == 2 and "no server" in err.getvalue()
    finally:
        if env is not None:
            os.environ["SHARDPLAN_SERVER"] = env
    assert cli.main(["--server", "http://x", "frobnicate"]) == 2


def test_health_submit_plan_get(server: Server) -> None:
    rc, out, _ = run(server, "health")
    assert rc == 0 and [json.loads(x)["status"] for x in out.splitlines()] == ["ok", "ready"]
    rc, out, _ = run(server, "submit", str(EXAMPLES / "flax_mlp.json"), "--name", "cli-mlp")
    assert rc == 0 and json.loads(out)["name"] in ("cli-mlp", "jit_apply_fn")
    rc, out, err = run(server, "plan", "-", "--name", "cli-stdin",
                       stdin=(EXAMPLES / "suggest_mlp.mlir").read_text())
    assert rc == 0, err
    plan = json.loads(out)
    pid = plan["id"]
    assert plan["plan"]["format"] == "shardplan.plan/v1"
    rc, out, _ = run(server, "plan", str(EXAMPLES / "flax_mlp.json"), "--mesh", "data=4,model=2")
    assert rc == 0 and json.loads(out)["plan"]["meshes"][0]["axes"][0]["size"] == 4
    gid = json.loads(out)["graph_id"]
    rc, out, _ = run(server, "plan", "--graph-id", str(gid), "--pass", "sdy-basic-propagate")
    assert rc == 0 and json.loads(out)["options"]["pass"] == "sdy-basic-propagate"
    rc, out, _ = run(server, "get", "plan", str(pid))
    assert rc == 0 and json.loads(out)["id"] == pid
    rc, out, _ = run(server, "get", "plan", str(pid), "--mlir")
    assert rc == 0 and out.startswith("module")
    rc, out, _ = run(server, "get", "graph", str(gid), "--raw")
    assert rc == 0 and json.loads(out)["format"] == "shardplan.graph/v1"
    for command in ("lint", "collectives", "cost"):
        rc, out, err = run(server, command, str(pid))
        assert rc == 0 and isinstance(json.loads(out), dict), (command, err)
    rc, out, _ = run(server, "suggest", str(pid), "--k", "1", "--max-candidates", "4")
    assert rc == 0 and json.loads(out)["objective"] == "time"
    rc, out, _ = run(server, "sweep", "--devices", "4", "--layers", "1", "--strategies", "dp,dp+tp")
    assert rc == 0 and json.loads(out)["rows"]


def test_put_list_table_delete(server: Server, tmp_path: Path) -> None:
    mesh = tmp_path / "mesh.json"
    mesh.write_text('{"axes":[{"name":"data","size":2}]}')
    rc, out, _ = run(server, "put", "mesh", "cli_mesh", str(mesh))
    assert rc == 0 and json.loads(out)["name"] == "cli_mesh"
    rc, out, _ = run(server, "--table", "list", "meshes")
    assert rc == 0 and out.splitlines()[0].split()[:2] == ["id", "name"] and "cli_mesh" in out
    rc, out, _ = run(server, "list", "meshes", "--table", "--limit", "1")
    assert rc == 0 and len(out.splitlines()) == 2
    rc, out, _ = run(server, "get", "mesh", "cli_mesh", "--table")
    assert rc == 0 and out.startswith("id ")
    rc, out, _ = run(server, "delete", "mesh", "cli_mesh")
    assert rc == 0 and out.strip() == "HTTP 204"
    rc, out, err = run(server, "get", "mesh", "cli_mesh")
    assert rc == 1 and out == ""
    assert err.strip() == "shardplan-py: HTTP 404: not_found: no mesh 'cli_mesh' at /name" or \
        err.startswith("shardplan-py: HTTP 404: not_found: ")
    rc, _, err = run(server, "get", "plan", "987654")
    assert rc == 1 and err.strip() == "shardplan-py: HTTP 404: not_found: no plan 987654 at /id"
    rc, _, err = run(server, "get", "plan", "one")
    assert rc == 2 and "not an id" in err
    rc, _, err = run(server, "put", "mesh", "x", "/no/such/file")
    assert rc == 1 and "No such file" in err


def test_compare_whatif_bench(server: Server, client: shardplan.Client, mlp_plan: shardplan.Plan,
                              tmp_path: Path) -> None:
    other = client.plan(EXAMPLES / "flax_mlp.json", pass_="sdy-basic-propagate")
    rc, out, _ = run(server, "compare", str(mlp_plan.id), str(other.id))
    assert rc == 0 and len(json.loads(out)["plans"]) == 2
    rc, _, err = run(server, "compare", str(mlp_plan.id))
    assert rc == 2 and "2 to 4" in err
    edits = tmp_path / "edits.json"
    edits.write_text(json.dumps({"edits": [
        {"kind": "constrain", "value": {"op": "/ops/0"}, "sharding": "<@mesh, [{}, {}]>"}]}))
    rc, out, _ = run(server, "whatif", str(mlp_plan.id), str(edits))
    assert rc == 0 and json.loads(out)["n_changed"] >= 1
    rc, out, err = run(server, "bench", str(mlp_plan.id), "--spec", '{"iters":1,"warmup":0}',
                       "--wait")
    assert rc == 0, err
    assert json.loads(out)["status"] == "succeeded"
    assert "succeeded 100%" in err, "progress on stderr"
    rc, out, err = run(server, "bench", str(mlp_plan.id), "--spec", '{"steps":3}')
    assert rc == 1 and "/steps" in err, "an unknown run parameter is an error, not ignored"
    rc, out, err = run(server, "bench", str(mlp_plan.id), "--devices", "2", "--iters", "1",
                       "--wait")
    assert rc == 1 and json.loads(out)["status"] == "failed" and "failed" in err
    rc, out, _ = run(server, "bench", str(mlp_plan.id), "--iters", "100000")
    rid = json.loads(out)["id"]
    rc, out, _ = run(server, "cancel", str(rid))
    assert rc == 0 and json.loads(out)["status"] == "canceled"
    rc, out, _ = run(server, "list", "benchmarks")
    assert rc == 0 and rid in [r["id"] for r in json.loads(out)["items"]]
    rc, out, _ = run(server, "delete", "benchmark", str(rid))
    assert rc == 0


def test_token_command(auth_server: Server) -> None:
    rc, _, err = run(auth_server, "list", "plans")
    assert rc == 1 and "HTTP 401: unauthorized" in err
    admin = auth_server.admin  # type: ignore[attr-defined]
    rc, out, _ = run(auth_server, "--token", admin, "token", "create", "--scope", "read",
                     "--label", "cli")
    assert rc == 0 and json.loads(out)["token"].startswith("spt_")
    rc, out, _ = run(auth_server, "--token", admin, "list", "tokens")
    assert rc == 0 and "cli" in [t["label"] for t in json.loads(out)["items"]]


def test_python_m_shardplan(server: Server) -> None:
    env = dict(os.environ, PYTHONPATH=str(PKG))
    r = subprocess.run([sys.executable, "-m", "shardplan", "--server", server.url, "health"],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.splitlines()[0])["status"] == "ok"


def test_sources_parse_as_python_3_9() -> None:
    for f in sorted((PKG / "shardplan").glob("*.py")):
        ast.parse(f.read_text(), filename=str(f), feature_version=(3, 9))


def test_no_jax_and_stdlib_only() -> None:
    allowed = set(sys.stdlib_module_names) if hasattr(sys, "stdlib_module_names") else None
    for f in sorted((PKG / "shardplan").glob("*.py")):
        tree = ast.parse(f.read_text())
        for node in ast.walk(tree):
            names: List[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for n in names:
                top = n.split(".")[0]
                assert top != "jax", f"{f.name} imports jax"
                if allowed is not None:
                    assert top in allowed, f"{f.name} imports {n}, not in the standard library"


def test_pip_install_offline(tmp_path: Path) -> None:
    """`pip install --no-build-isolation --no-index` of clients/python gives the package and
    the shardplan-py console script (setuptools and wheel from the system, nothing downloaded)."""
    pip = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True)
    if pip.returncode != 0:
        pytest.skip("no pip for this interpreter")
    import importlib.util

    for need in ("setuptools", "wheel"):  # the build backend (Debian: in DEB_PKGS)
        if importlib.util.find_spec(need) is None:
            pytest.skip(f"no {need} for this interpreter")
    src = tmp_path / "src"
    shutil.copytree(PKG, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    target = tmp_path / "target"
    r = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-build-isolation", "--no-index",
         "--no-deps", "--no-cache-dir", "--disable-pip-version-check", "--target", str(target),
         str(src)],
        capture_output=True, text=True, timeout=300,
        env=dict(os.environ, PIP_NO_INPUT="1", PIP_BREAK_SYSTEM_PACKAGES="1"),
    )
    assert r.returncode == 0, r.stdout + r.stderr
    script = target / "bin" / "shardplan-py"
    assert script.exists(), sorted(p.name for p in target.rglob("*"))[:50]
    assert (target / "shardplan" / "py.typed").exists()
    env = dict(os.environ, PYTHONPATH=str(target))
    h = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True,
                       env=env, timeout=60)
    assert h.returncode == 0 and "shardplan-py" in h.stdout
