"""Health, graphs, meshes, rules and profiles against a real server."""

from __future__ import annotations

import json
import re

import pytest

import shardplan
from conftest import EXAMPLES, ROOT


def test_health_ready_metrics_openapi(client: shardplan.Client) -> None:
    h = client.health()
    assert isinstance(h, shardplan.Health) and h.status == "ok"
    r = client.ready()
    assert r.status == "ready" and isinstance(r.schema_version, int) and r.schema_version >= 1
    assert "shardplan_http_requests_total" in client.metrics()
    doc = client.openapi()
    assert doc["openapi"].startswith("3.") and "/v1/plans" in doc["paths"]


def test_every_route_has_a_method() -> None:
    """Each route of the server's table (server/srv_routes.c) has a Client method."""
    methods = {
        "GET /healthz": "health", "GET /readyz": "ready", "GET /metrics": "metrics",
        "GET /v1/openapi.json": "openapi",
        "POST /v1/graphs": "submit_graph", "GET /v1/graphs": "list_graphs",
        "GET /v1/graphs/{}": "get_graph", "DELETE /v1/graphs/{}": "delete_graph",
        "PUT /v1/meshes/{}": "put_mesh", "GET /v1/meshes": "list_meshes",
        "GET /v1/meshes/{}": "get_mesh", "DELETE /v1/meshes/{}": "delete_mesh",
        "PUT /v1/rules/{}": "put_rule", "GET /v1/rules": "list_rules",
        "GET /v1/rules/{}": "get_rule", "DELETE /v1/rules/{}": "delete_rule",
        "PUT /v1/profiles/{}": "put_profile", "GET /v1/profiles": "list_profiles",
        "GET /v1/profiles/{}": "get_profile", "DELETE /v1/profiles/{}": "delete_profile",
        "POST /v1/plans": "plan", "GET /v1/plans": "list_plans",
        "GET /v1/plans/{}": "get_plan", "DELETE /v1/plans/{}": "delete_plan",
        "GET /v1/plans/{}/lint": "lint", "GET /v1/plans/{}/collectives": "collectives",
        "GET /v1/plans/{}/cost": "cost", "GET /v1/plans/{}/memory": "memory", "POST /v1/plans/{}/whatif": "whatif",
        "GET /v1/plans/{}/suggest": "suggest", "GET /v1/plans/{}/sweep": "sweep_plan",
        "GET /v1/compare": "compare",
        "GET /v1/sweep": "sweep",
        "POST /v1/migrations": "migrate", "GET /v1/migrations": "list_migrations",
        "GET /v1/migrations/{}": "get_migration",
        "POST /v1/runs": "create_run", "GET /v1/runs": "list_runs",
        "GET /v1/runs/{}": "get_run", "DELETE /v1/runs/{}": "delete_run",
        "POST /v1/benchmarks": "benchmark", "GET /v1/benchmarks": "list_benchmarks",
        "GET /v1/benchmarks/{}": "get_benchmark", "DELETE /v1/benchmarks/{}": "delete_benchmark",
        "POST /v1/benchmarks/{}/cancel": "cancel_benchmark",
        "GET /v1/benchmarks/{}/trace": "trace",
        "POST /v1/tokens": "create_token", "GET /v1/tokens": "list_tokens",
        "DELETE /v1/tokens/{}": "delete_token",
    }
    table = (ROOT / "server" / "srv_routes.c").read_text()
    routes = re.findall(r'\{"(GET|POST|PUT|DELETE)", "(/[^"]*)", srv_h_', table)
    assert len(routes) >= 40, "cannot read the route table of server/srv_routes.c"
    for verb, pattern in routes:
        key = f"{verb} {re.sub(r'{[a-z]*}', '{}', pattern)}"
        assert key in methods, f"no Client method for {key}"
        assert callable(getattr(shardplan.Client, methods[key]))


def test_graphs(client: shardplan.Client, mlp_json: dict, mlp_mlir: str) -> None:
    g = client.submit_graph(mlp_json, name="store-mlp")
    assert isinstance(g, shardplan.Graph) and g.format == "json" and g.size > 0
    again = client.submit_graph(mlp_json, name="store-mlp")
    assert again.id == g.id and not again.created and again.existed and again.message
    alias = client.submit_graph(mlp_json, name="store-mlp-alias")
    assert alias.id == g.id and alias.existed and alias.alias_recorded == "store-mlp-alias"
    assert "store-mlp-alias" in client.get_graph(g.id).aliases
    m = client.submit_graph(mlp_mlir + "\n// another copy\n", name="store-mlir")
    assert m.format == "mlir" and m.created and m.name == "store-mlir"

    full = client.get_graph(g.id)
    assert full.graph is not None and full.graph["name"] == mlp_json["name"] and full.mlir is None
    assert "func.func" in (client.get_graph(m).mlir or "")
    assert client.get_graph_raw(g.id) == mlp_json
    assert "another copy" in client.get_graph_raw(m.id)

    names = [x.name for x in client.list_graphs(name="store-mlir")]
    assert names == ["store-mlir"]
    assert all(x.format == "mlir" for x in client.list_graphs(format="mlir"))
    page = client.list_graphs(limit=1)
    assert len(page) == 1 and page.next_after > 0
    ids = [x.id for x in client.iter_graphs(limit=1)]
    assert g.id in ids and m.id in ids and len(ids) == len(set(ids))

    client.delete_graph(m)
    with pytest.raises(shardplan.NotFound) as ei:
        client.get_graph(m.id)
    assert ei.value.status == 404 and ei.value.code == "not_found"


def test_graph_errors(client: shardplan.Client) -> None:
    with pytest.raises(shardplan.BadRequest) as ei:
        client.submit_graph("func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n  return %y\n}")
    e = ei.value
    assert e.status == 400 and e.code == "invalid" and e.message
    assert e.path and ":" in e.path, "an MLIR error's path is LINE:COL"
    with pytest.raises(shardplan.BadRequest) as ei:
        client.submit_graph({"inputs": [{"name": "x", "type": "tensor<4xf32>"}],
                             "ops": [{"op": "stablehlo.add", "operands": ["x", "nope"], "result": "y"}],
                             "outputs": ["y"]})
    assert ei.value.path.startswith("/ops/0/operands/1")
    with pytest.raises(shardplan.BadRequest) as ei:
        client.list_graphs(format="xml")
    assert ei.value.path == "/format"
    with pytest.raises(shardplan.BadRequest) as ei:
        client.list_graphs(limit=-1)
    assert ei.value.path == "/limit"
    with pytest.raises(shardplan.NotFound) as ei:
        client.get_graph(987654)
    assert ei.value.path == "/id"


def test_meshes(client: shardplan.Client) -> None:
    d = client.put_mesh("store_wide", {"data": 4, "model": 2})
    assert d.created and d.body == {"axes": [{"name": "data", "size": 4}, {"name": "model", "size": 2}]}
    same = client.put_mesh("store_wide", shardplan.Mesh(axes=[shardplan.MeshAxis("data", 4),
                                                             shardplan.MeshAxis("model", 2)]))
    assert not same.created and same.id == d.id
    with pytest.raises(shardplan.Conflict) as ei:
        client.put_mesh("store_wide", {"data": 8}, create_only=True)
    assert ei.value.status == 409
    assert client.get_mesh("store_wide").body["axes"][0]["size"] == 4
    assert "store_wide" in [x.name for x in client.list_meshes(limit=1000)]
    with pytest.raises(shardplan.BadRequest) as ei:
        client.put_mesh("not a name", {"data": 2})
    assert ei.value.path == "/name"
    with pytest.raises(shardplan.BadRequest) as ei:
        client.put_mesh("store_bad", {"axes": [{"name": "data", "size": 0}]})
    assert ei.value.path.startswith("/axes/0")
    with pytest.raises(TypeError):
        client.put_mesh("store_x", 3)
    client.delete_mesh("store_wide")
    with pytest.raises(shardplan.NotFound):
        client.get_mesh("store_wide")
    with pytest.raises(shardplan.NotFound):
        client.delete_mesh("store_wide")


def test_rules(client: shardplan.Client) -> None:
    r = client.put_rule("store_matmul", "i j, j k -> i k")
    assert r.created and r.body == "i j, j k -> i k"
    obj = {"sharding_rule": "i k, k j -> i j", "reduction_factors": ["k"]}
    assert client.put_rule("store_matmul", obj).body == obj
    assert client.get_rule("store_matmul").body == obj
    assert "store_matmul" in [x.name for x in client.list_rules()]
    with pytest.raises(shardplan.BadRequest):
        client.put_rule("store_bad", 42)
    client.delete_rule("store_matmul")
    with pytest.raises(shardplan.NotFound):
        client.get_rule("store_matmul")


def test_profiles(client: shardplan.Client) -> None:
    prof = json.loads((ROOT / "profiles" / "a100-80gb.json").read_text())
    p = client.put_profile("store_a100", prof)
    assert p.created and p.body == prof
    assert client.get_profile("store_a100").body == prof
    assert "store_a100" in [x.name for x in client.list_profiles()]
    with pytest.raises(shardplan.BadRequest):
        client.put_profile("store_bad", {"peak_flops": "fast"})
    client.delete_profile("store_a100")
    with pytest.raises(shardplan.NotFound):
        client.delete_profile("store_a100")


def test_transport_error() -> None:
    c = shardplan.Client("http://127.0.0.1:9", timeout=5)
    with pytest.raises(shardplan.TransportError) as ei:
        c.health()
    assert ei.value.status == 0 and isinstance(ei.value, shardplan.ShardplanError)
    with pytest.raises(ValueError):
        shardplan.Client("localhost:8080")


def test_error_body_decoding() -> None:
    from shardplan.errors import error_from_response

    e = error_from_response(
        400, b'{"error":{"code":"invalid","message":"bad","path":"/ops/3/operands/0"}}')
    assert type(e) is shardplan.BadRequest and e.path == "/ops/3/operands/0"
    assert str(e) == "HTTP 400: invalid: bad at /ops/3/operands/0"
    t = error_from_response(503, b'{"error":{"code":"timeout","message":"slow","path":""}}',
                            retry_after="2")
    assert isinstance(t, shardplan.PlanTimeout) and isinstance(t, shardplan.Unavailable)
    assert t.retry_after == 2.0
    odd = error_from_response(502, b"<html>bad gateway</html>")
    assert type(odd) is shardplan.ShardplanError and "bad gateway" in odd.message
    import pickle

    back = pickle.loads(pickle.dumps(e))
    assert type(back) is shardplan.BadRequest and back.path == e.path and back.code == "invalid"


def test_examples_exist() -> None:
    assert (EXAMPLES / "flax_mlp.json").exists() and (EXAMPLES / "lint_demo.mlir").exists()


def test_raw_request_and_method_not_allowed(client: shardplan.Client) -> None:
    r = client.request("GET", "/v1/plans", query={"limit": 1, "after": None})
    assert r.status == 200 and "items" in r.json()
    with pytest.raises(shardplan.MethodNotAllowed) as ei:
        client.request("PATCH", "/v1/plans")
    assert ei.value.status == 405 and ei.value.code == "method_not_allowed"
    with pytest.raises(shardplan.NotFound) as ei:
        client.request("GET", "/v1/nothing-here")
    assert ei.value.code == "not_found"
    with pytest.raises(shardplan.UnsupportedMediaType) as ei:
        client.request("POST", "/v1/plans", body=b"\x00\x01", content_type="image/png")
    assert ei.value.status == 415


def test_payload_too_large(client: shardplan.Client) -> None:
    axes = [{"name": f"axis{i}", "size": 1} for i in range(40000)]  # > 1 MiB of text
    with pytest.raises(shardplan.PayloadTooLarge) as ei:
        client.put_mesh("store_huge", {"axes": axes})
    assert ei.value.status == 413 and ei.value.code == "too_large"


def test_body_over_the_limit(client: shardplan.Client) -> None:
    """A body over --max-body (16 MiB) is a 413 the client reads, even when the server
    answers before it has taken the whole body."""
    huge = "// padding\n" * (17 * 1024 * 1024 // 11)
    with pytest.raises(shardplan.PayloadTooLarge) as ei:
        client.plan(huge)
    assert ei.value.status == 413 and "limit" in ei.value.message


def test_migrations(client: shardplan.Client, mlp_mlir: str) -> None:
    gspmd = (ROOT / "tests" / "lit" / "gspmd_migrate.mlir").read_text()
    m = client.migrate(gspmd, name="gspmd_migrate")
    assert isinstance(m, shardplan.Migration) and m.created and m.id > 0
    assert m.report is not None and m.report["format"] == "shardplan.migration/v1"
    assert m.report["divergences"] and m.report["fix"]["constraints"]
    again = client.migrate(gspmd, name="gspmd_migrate")
    assert again.id == m.id and not again.created
    got = client.get_migration(m)
    assert got.mlir == gspmd and got.report == m.report
    assert m.id in [x.id for x in client.list_migrations(limit=1000)]
    with pytest.raises(shardplan.errors.BadRequest):
        client.migrate(mlp_mlir)
    with pytest.raises(shardplan.errors.NotFound):
        client.get_migration(999999)
