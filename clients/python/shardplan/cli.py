"""``shardplan-py``: the command line of the Python client.

It mirrors the C client (``shardplan client --help``, cmd/cmd_client.c):
the same commands and options, plus one command for each advisor route.
It is named ``shardplan-py`` so that it does not shadow the ``shardplan``
binary. Each command prints the server's JSON (or a table with
``--table``); an error prints ``shardplan-py: HTTP 404: not_found: no plan
99 at /id`` on stderr and exits 1; bad usage exits 2. The server and token
also come from ``SHARDPLAN_SERVER`` and ``SHARDPLAN_TOKEN``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence, TextIO

from .client import Client
from .errors import BenchmarkFailed, ShardplanError
from .types import Benchmark

PROG = "shardplan-py"

_COLLECTIONS = {
    "plan": "plans", "plans": "plans", "graph": "graphs", "graphs": "graphs",
    "run": "runs", "runs": "runs", "bench": "benchmarks", "benchmark": "benchmarks",
    "benchmarks": "benchmarks", "mesh": "meshes", "meshes": "meshes", "rule": "rules",
    "rules": "rules", "profile": "profiles", "profiles": "profiles", "token": "tokens",
    "tokens": "tokens",
}

EPILOG = """\
URL and token also come from SHARDPLAN_SERVER and SHARDPLAN_TOKEN.
One-line pipeline: shardplan example mlp | shardplan-py --server URL plan -
"""


class UsageError(Exception):
    """Bad usage: exit 2."""


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    with open(path, encoding="utf-8") as f:
        return f.read()


def _mesh_arg(s: Optional[str]) -> Any:
    """A stored mesh's name, or ``data=2,model=4``."""
    if s is None or "=" not in s:
        return s
    axes: Dict[str, int] = {}
    for part in s.split(","):
        name, _, size = part.partition("=")
        if not name or not size.isdigit():
            raise UsageError(f"--mesh: '{part}' is not NAME=SIZE")
        axes[name.strip()] = int(size)
    return axes


def _raw(x: Any) -> Any:
    """The JSON of a result: its ``raw``, lists of results as ``{"items", "next_after"}``."""
    if hasattr(x, "items") and hasattr(x, "next_after"):
        return {"items": [_raw(i) for i in x.items], "next_after": x.next_after}
    return getattr(x, "raw", x)


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, (dict, list)):
        s = json.dumps(v, separators=(",", ":"))
        return s if len(s) <= 60 else s[:57] + "..."
    return str(v)


def print_table(doc: Any, out: TextIO) -> None:
    """A list's items as columns of their scalar members; an object as name/value rows."""
    rows: List[Dict[str, Any]]
    if isinstance(doc, dict) and isinstance(doc.get("items"), list):
        rows = [r for r in doc["items"] if isinstance(r, dict)]
    elif isinstance(doc, list):
        rows = [r for r in doc if isinstance(r, dict)]
    elif isinstance(doc, dict):
        w = max((len(k) for k in doc), default=0)
        for k, v in doc.items():
            out.write(f"{k.ljust(w)}  {_cell(v)}\n")
        return
    else:
        out.write(f"{doc}\n")
        return
    cols: List[str] = []
    for r in rows:
        for k, v in r.items():
            if k not in cols and not isinstance(v, list):
                cols.append(k)
    cells = [[_cell(r.get(c)) for c in cols] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(cols)]
    out.write("  ".join(c.ljust(widths[i]) for i, c in enumerate(cols)).rstrip() + "\n")
    for row in cells:
        out.write("  ".join(v.ljust(widths[i]) for i, v in enumerate(row)).rstrip() + "\n")


def _parser() -> argparse.ArgumentParser:
    fmt = argparse.ArgumentParser(add_help=False)
    fmt.add_argument("--table", dest="table", action="store_true", default=argparse.SUPPRESS,
                     help="print a table instead of JSON")
    fmt.add_argument("--json", dest="table", action="store_false", default=argparse.SUPPRESS,
                     help="print the server's JSON (the default)")
    p = argparse.ArgumentParser(
        prog=PROG,
        description="The command line of Shardplan's Python client: one request per command, "
        "as `shardplan client` sends them.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[fmt],
    )
    p.add_argument("--server", default=os.environ.get("SHARDPLAN_SERVER"),
                   help="base URL (default: $SHARDPLAN_SERVER)")
    p.add_argument("--token", default=os.environ.get("SHARDPLAN_TOKEN"),
                   help="API token (default: $SHARDPLAN_TOKEN)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per request (default 120)")
    p.add_argument("--version", action="version", version="%(prog)s 0.1.0")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    def cmd(name: str, help_: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help_, description=help_, parents=[fmt])

    s = cmd("submit", "store a graph (JSON or MLIR)")
    s.add_argument("file", metavar="FILE|-")
    s.add_argument("--name")

    s = cmd("plan", "plan a graph (the same request again answers the stored plan)")
    s.add_argument("file", metavar="FILE|-", nargs="?")
    s.add_argument("--graph-id", type=int, help="plan a stored graph instead of FILE")
    s.add_argument("--mesh", help="a stored mesh's name, or NAME=SIZE,... (graph documents)")
    s.add_argument("--pass", dest="pass_", metavar="P", help="the pipeline (sdy-propagation-pipeline)")
    s.add_argument("--name")

    s = cmd("get", "one stored resource")
    s.add_argument("kind", choices=["plan", "graph", "run", "benchmark", "bench", "mesh", "rule", "profile"])
    s.add_argument("id", metavar="ID|NAME")
    s.add_argument("--mlir", action="store_true", help="plan: the propagated module as MLIR")
    s.add_argument("--raw", action="store_true", help="graph: the document as stored")

    s = cmd("list", "one page of a collection")
    s.add_argument("kind", choices=["plans", "graphs", "runs", "benchmarks", "meshes", "rules",
                                    "profiles", "tokens", "plan", "graph", "run", "benchmark",
                                    "mesh", "rule", "profile", "token"])
    s.add_argument("--limit", type=int)
    s.add_argument("--after", type=int)

    s = cmd("put", "store a named document")
    s.add_argument("kind", choices=["mesh", "rule", "profile"])
    s.add_argument("name")
    s.add_argument("file", metavar="FILE|-")

    s = cmd("delete", "delete a stored resource")
    s.add_argument("kind", choices=["plan", "graph", "run", "benchmark", "bench", "mesh", "rule",
                                    "profile", "token"])
    s.add_argument("id", metavar="ID|NAME")

    s = cmd("compare", "2 to 4 plans side by side")
    s.add_argument("ids", metavar="ID", type=int, nargs="+")
    s.add_argument("--profile")

    s = cmd("bench", "queue a benchmark run of a plan")
    s.add_argument("plan_id", metavar="PLAN_ID", type=int)
    s.add_argument("--spec", help="JSON object of run parameters (devices, warmup, iters, seed, affinity)")
    s.add_argument("--webhook", help="http:// loopback URL the server POSTs the final run to")
    for opt in ("devices", "warmup", "iters", "seed"):
        s.add_argument("--" + opt, type=int)
    s.add_argument("--idempotency-key")
    s.add_argument("--wait", action="store_true", help="poll until the run ends; progress on stderr")

    s = cmd("cancel", "cancel a queued or running benchmark run")
    s.add_argument("run_id", metavar="RUN_ID", type=int)

    cmd("health", "/healthz and /readyz")
    cmd("openapi", "the OpenAPI document")

    for name, help_ in (("cost", "the partitioned plan's per-device cost"),
                        ("collectives", "every inserted collective and its cause")):
        s = cmd(name, help_)
        s.add_argument("plan_id", metavar="PLAN_ID", type=int)
        s.add_argument("--profile")

    s = cmd("lint", "findings with fixes")
    s.add_argument("plan_id", metavar="PLAN_ID", type=int)
    s.add_argument("--profile")
    s.add_argument("--mesh")
    s.add_argument("--min-bytes", type=int)

    s = cmd("suggest", "constraints that cut predicted time or memory")
    s.add_argument("plan_id", metavar="PLAN_ID", type=int)
    s.add_argument("--objective", choices=["time", "memory"])
    s.add_argument("--k", type=int)
    s.add_argument("--profile")
    s.add_argument("--max-candidates", type=int)

    s = cmd("whatif", "a plan with edits, re-propagated")
    s.add_argument("plan_id", metavar="PLAN_ID", type=int)
    s.add_argument("edits", metavar="EDITS|-", help='file of {"edits": [...]} or of the list')
    s.add_argument("--save", action="store_true", help="store the edited module as a new plan")
    s.add_argument("--profile")

    s = cmd("sweep", "a transformer template over meshes x strategies, ranked")
    for opt in ("devices", "layers", "d_model", "heads", "seq", "batch"):
        s.add_argument("--" + opt.replace("_", "-"), dest=opt, type=int)
    s.add_argument("--strategies", help="dp,fsdp,tp,dp+tp")
    s.add_argument("--train", action="store_true", default=None)
    s.add_argument("--profile")

    s = cmd("token", "create an API token (scope admin)")
    s.add_argument("action", choices=["create"])
    s.add_argument("--scope", default="read", choices=["read", "write", "admin"])
    s.add_argument("--label")
    return p


def _progress(errs: TextIO) -> Callable[[Benchmark], None]:
    last: List[Any] = [None]

    def show(run: Benchmark) -> None:
        state = (run.status, run.progress)
        if state != last[0]:
            last[0] = state
            errs.write(f"{PROG}: run {run.id}: {run.status} {run.progress * 100:.0f}%\n")
            errs.flush()

    return show


def _run(c: Client, a: argparse.Namespace, errs: TextIO) -> Any:
    """Sends the request(s) of command a; returns what to print."""
    if a.command == "submit":
        return c.submit_graph(_read(a.file), name=a.name)
    if a.command == "plan":
        if a.graph_id is not None:
            if a.graph_id <= 0:
                raise UsageError("--graph-id takes a positive integer")
            return c.plan_graph(a.graph_id, mesh=_mesh_arg(a.mesh), pass_=a.pass_, name=a.name)
        if a.file is None:
            raise UsageError("plan: give FILE, - or --graph-id ID")
        return c.plan(_read(a.file), mesh=_mesh_arg(a.mesh), pass_=a.pass_, name=a.name)
    if a.command == "get":
        coll = _COLLECTIONS[a.kind]
        if coll in ("plans", "graphs", "runs", "benchmarks") and not a.id.isdigit():
            raise UsageError(f"get {a.kind}: '{a.id}' is not an id")
        if coll == "plans":
            return c.get_plan_mlir(int(a.id)) if a.mlir else c.get_plan(int(a.id))
        if coll == "graphs":
            return c.get_graph_raw(int(a.id)) if a.raw else c.get_graph(int(a.id))
        if coll == "runs":
            return c.get_run(int(a.id))
        if coll == "benchmarks":
            return c.get_benchmark(int(a.id))
        return {"meshes": c.get_mesh, "rules": c.get_rule, "profiles": c.get_profile}[coll](a.id)
    if a.command == "list":
        fn = {"plans": c.list_plans, "graphs": c.list_graphs, "runs": c.list_runs,
              "benchmarks": c.list_benchmarks, "meshes": c.list_meshes, "rules": c.list_rules,
              "profiles": c.list_profiles, "tokens": c.list_tokens}[_COLLECTIONS[a.kind]]
        return fn(limit=a.limit, after=a.after)
    if a.command == "put":
        text = _read(a.file)
        try:
            doc = json.loads(text)
        except ValueError as e:
            raise UsageError(f"{a.file}: not JSON: {e}") from None
        if a.kind == "mesh":
            return c.put_mesh(a.name, doc)
        if a.kind == "rule":
            return c.put_rule(a.name, doc)
        return c.put_profile(a.name, doc)
    if a.command == "delete":
        coll = _COLLECTIONS[a.kind]
        if coll in ("plans", "graphs", "runs", "benchmarks", "tokens"):
            if not a.id.isdigit():
                raise UsageError(f"delete {a.kind}: '{a.id}' is not an id")
            rid: Any = int(a.id)
        else:
            rid = a.id
        {"plans": c.delete_plan, "graphs": c.delete_graph, "runs": c.delete_run,
         "benchmarks": c.delete_benchmark, "meshes": c.delete_mesh, "rules": c.delete_rule,
         "profiles": c.delete_profile, "tokens": c.delete_token}[coll](rid)
        return "HTTP 204"
    if a.command == "compare":
        if not 2 <= len(a.ids) <= 4:
            raise UsageError("compare: give 2 to 4 plan ids")
        return c.compare(a.ids, profile=a.profile)
    if a.command == "bench":
        params: Dict[str, Any] = {}
        if a.spec is not None:
            try:
                params = json.loads(a.spec)
            except ValueError as e:
                raise UsageError(f"--spec: not JSON: {e}") from None
            if not isinstance(params, dict):
                raise UsageError("--spec takes a JSON object")
        return c.benchmark(
            a.plan_id, devices=a.devices, warmup=a.warmup, iters=a.iters, seed=a.seed,
            webhook_url=a.webhook, idempotency_key=a.idempotency_key, params=params,
            wait=a.wait, progress=_progress(errs) if a.wait else None,
        )
    if a.command == "cancel":
        return c.cancel_benchmark(a.run_id)
    if a.command == "health":
        return [c.health(), c.ready()]
    if a.command == "openapi":
        return c.openapi()
    if a.command == "cost":
        return c.cost(a.plan_id, profile=a.profile)
    if a.command == "collectives":
        return c.collectives(a.plan_id, profile=a.profile)
    if a.command == "lint":
        return c.lint(a.plan_id, profile=a.profile, mesh=a.mesh, min_bytes=a.min_bytes)
    if a.command == "suggest":
        return c.suggest(a.plan_id, objective=a.objective, k=a.k, profile=a.profile,
                         max_candidates=a.max_candidates)
    if a.command == "whatif":
        try:
            doc = json.loads(_read(a.edits))
        except ValueError as e:
            raise UsageError(f"{a.edits}: not JSON: {e}") from None
        edits = doc.get("edits") if isinstance(doc, dict) else doc
        if not isinstance(edits, list):
            raise UsageError(f'{a.edits}: expected {{"edits": [...]}} or a list of edits')
        return c.whatif(a.plan_id, edits, save=a.save, profile=a.profile)
    if a.command == "sweep":
        return c.sweep(devices=a.devices, layers=a.layers, d_model=a.d_model, heads=a.heads,
                       seq=a.seq, batch=a.batch, strategies=a.strategies, train=a.train,
                       profile=a.profile)
    if a.command == "token":
        return c.create_token(a.scope, label=a.label)
    raise UsageError(f"unknown command '{a.command}'")


def _print(result: Any, table: bool, out: TextIO) -> None:
    items = result if isinstance(result, list) else [result]
    for r in items:
        if isinstance(r, str):
            out.write(r if r.endswith("\n") else r + "\n")
            continue
        doc = _raw(r)
        if table:
            print_table(doc, out)
        else:
            out.write(json.dumps(doc, separators=(",", ":")) + "\n")


def main(argv: Optional[Sequence[str]] = None, out: TextIO = sys.stdout, errs: TextIO = sys.stderr) -> int:
    """Runs one command; returns the exit status (0, 1 after an error, 2 for bad usage)."""
    p = _parser()
    try:
        a = p.parse_args(argv)
    except SystemExit as e:  # argparse: --help (0) or bad usage (2)
        return int(e.code or 0)
    if a.command is None:
        p.print_usage(errs)
        errs.write(f"{PROG}: give a COMMAND (see --help)\n")
        return 2
    if not a.server:
        errs.write(f"{PROG}: no server: give --server URL or SHARDPLAN_SERVER\n")
        return 2
    try:
        client = Client(a.server, a.token, timeout=a.timeout)
        result = _run(client, a, errs)
    except UsageError as e:
        errs.write(f"{PROG}: {e}\n")
        return 2
    except BenchmarkFailed as e:
        _print(e.run, getattr(a, "table", False), out)
        errs.write(f"{PROG}: {e}\n")
        return 1
    except ShardplanError as e:
        errs.write(f"{PROG}: {e}\n")
        return 1
    except OSError as e:
        errs.write(f"{PROG}: {e}\n")
        return 1
    _print(result, getattr(a, "table", False), out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
