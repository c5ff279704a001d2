"""Plans and the advisor (cost, lint, collectives, suggest, what-if, compare, sweep)."""

from __future__ import annotations

import copy

import pytest

import shardplan
from conftest import EXAMPLES, FakeLowered

JIT_F = """\
module @jit_f attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["data"=2, "model"=4]>
  func.func public @main(%arg0: tensor<16x512xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>}, %arg1: tensor<512x256xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>}) -> (tensor<16x256xf32> {jax.result_info = "result"}) {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<16x512xf32>, tensor<512x256xf32>) -> tensor<16x256xf32>
    %1 = stablehlo.tanh %0 : tensor<16x256xf32>
    return %1 : tensor<16x256xf32>
  }
}
"""

# A graph document with a custom call whose rule comes from rules=.
CUSTOM = {
    "format": "shardplan.graph/v1",
    "name": "custom_graph",
    "meshes": [{"name": "mesh", "axes": [{"name": "data", "size": 2}, {"name": "model", "size": 4}]}],
    "inputs": [{"name": "x", "type": "tensor<8x64xf32>", "sharding": ["data", None]},
               {"name": "w", "type": "tensor<64x32xf32>", "sharding": [None, "model"]}],
    "ops": [{"op": "stablehlo.custom_call", "call_target": "py_matmul", "operands": ["x", "w"],
             "result": "y", "type": "tensor<8x32xf32>"}],
    "outputs": ["y"],
}


class FakeJaxMesh:
    """What the client reads of a jax.sharding.Mesh: axis_names and shape."""

    axis_names = ("data", "model")
    shape = {"data": 4, "model": 2}


def test_plan_graph_dict(client: shardplan.Client, mlp_json: dict, mlp_plan: shardplan.Plan) -> None:
    p = mlp_plan
    assert isinstance(p, shardplan.Plan) and p.id > 0 and len(p.hash) == 64
    assert p.name == mlp_json["name"] and p.options["pass"] == "sdy-propagation-pipeline"
    doc = p.plan
    assert doc.format == "shardplan.plan/v1" and doc.pass_ == "sdy-propagation-pipeline"
    assert doc.meshes[0].shape == {"data": 2, "model": 4} and doc.meshes[0].devices == 8
    assert len(p.inputs) == 9 and p.inputs[0].name == "layer0.W1"
    w1 = p.inputs[0].sharding
    assert isinstance(w1, shardplan.Sharding) and w1.mesh == "mesh"
    assert w1.partition_spec() == (None, "model") and w1.spec_text() == "P(None, 'model')"
    assert p.inputs[0].local_shape == [1024, 256]
    assert p.in_specs()[8] == ("data", None) and p.out_specs() == [("data", None)]
    assert p.main.ops and p.main.ops[0].op == "stablehlo.dot_general"
    assert p.cost is not None and isinstance(p.cost.memory.peak_bytes, int)
    assert p.cost.flops.total > 0 and p.cost.time.step_s > 0
    # the same request again: the stored plan
    again = client.plan(mlp_json)
    assert again.id == p.id and not again.created
    # the same module as MLIR hashes alike
    assert client.plan((EXAMPLES / "flax_mlp.mlir").read_text()).id == p.id


def test_plan_fake_lowered(client: shardplan.Client) -> None:
    low = FakeLowered(JIT_F)
    p = client.plan(low)
    assert low.calls == 1
    assert p.name == "jit_f", "a plan of module @jit_f is named jit_f"
    assert [t.sharding.partition_spec() for t in p.inputs] == [("data", None), (None, "model")]
    assert p.outputs[0].sharding.partition_spec() == ("data", "model")
    assert p.outputs[0].name == "result"
    named = client.plan(FakeLowered(JIT_F.replace("tanh", "exponential")), name="f-exp")
    assert named.created and named.name == "f-exp"
    with pytest.raises(TypeError):
        client.plan(type("Bad", (), {"as_text": lambda self: b"bytes"})())


def test_plan_sources(client: shardplan.Client, mlp_json: dict, tmp_path) -> None:
    import json

    f = tmp_path / "g.json"
    f.write_text(json.dumps(mlp_json))
    assert client.plan(f).name == mlp_json["name"]
    assert client.plan(json.dumps(mlp_json).encode()).hash == client.plan(mlp_json).hash
    with pytest.raises(TypeError):
        client.plan(12)
    with pytest.raises(ValueError):
        client.plan("{not json")
    with pytest.raises(ValueError, match="pathlib.Path"):
        client.plan(str(f))


def test_plan_mesh_forms(client: shardplan.Client, mlp_json: dict) -> None:
    p = client.plan(mlp_json, mesh={"data": 4, "model": 2})
    assert p.plan.meshes[0].shape == {"data": 4, "model": 2}
    assert p.options.get("mesh") == "mesh"
    client.put_mesh("plans_tall", {"data": 1, "model": 8})
    stored = client.plan(mlp_json, mesh="plans_tall")
    assert stored.options["mesh"] == "plans_tall" and stored.mesh_id > 0
    assert stored.plan.meshes[0].shape == {"data": 1, "model": 8}
    dc = client.plan(mlp_json, mesh=shardplan.Mesh(name="mesh", axes=[
        shardplan.MeshAxis("data", 8), shardplan.MeshAxis("model", 1)]))
    assert dc.plan.meshes[0].shape == {"data": 8, "model": 1}
    jm = client.plan(mlp_json, mesh=FakeJaxMesh())
    assert jm.id == p.id and not jm.created, "the same mesh again: the stored plan"
    g = client.submit_graph(mlp_json)
    pg = client.plan_graph(g, mesh="plans_tall", pass_="sdy-basic-propagate")
    assert pg.graph_id == g.id and pg.options["pass"] == "sdy-basic-propagate"
    assert pg.options["mesh"] == "plans_tall" and pg.created


def test_plan_rules(client: shardplan.Client) -> None:
    bare = client.plan(CUSTOM)
    assert any(d.kind == "custom_call_without_rule" for d in bare.plan.diagnostics)
    ruled = client.plan(CUSTOM, rules={"py_matmul": "i k, k j -> i j"})
    assert ruled.id != bare.id
    assert not any(d.kind == "custom_call_without_rule" for d in ruled.plan.diagnostics)
    assert ruled.outputs[0].sharding.partition_spec() == ("data", "model")
    assert "custom_rules" not in CUSTOM, "the caller's document is not changed"
    # MLIR carries no rules: rules= stores them first
    text = (EXAMPLES / "lint_demo.mlir").read_text()
    p = client.plan(text, rules={"my_kernel": "i j -> i j"}, name="lint-demo-ruled")
    assert client.get_rule("my_kernel").body == "i j -> i j"
    assert not any(d.kind == "custom_call_without_rule" for d in p.plan.diagnostics)
    client.delete_rule("my_kernel")


def test_plan_example(client: shardplan.Client) -> None:
    p = client.plan_example("mlp", layers=1, strategy="dp+tp", mesh={"data": 2, "model": 4},
                            name="example-mlp")
    assert p.name == "example-mlp" and p.plan.meshes[0].devices == 8
    with pytest.raises(shardplan.BadRequest) as ei:
        client.plan_example("mlp", layers=0)
    assert ei.value.path == "/example/layers"


def test_plan_errors(client: shardplan.Client, mlp_json: dict, mlp_mlir: str) -> None:
    with pytest.raises(shardplan.BadRequest) as ei:
        client.plan(mlp_json, pass_="no-such-pass")
    assert ei.value.path == "/options/pass" and ei.value.code == "invalid"
    with pytest.raises(shardplan.BadRequest) as ei:
        client.plan(mlp_mlir, mesh={"data": 8})
    assert ei.value.path == "/mesh"
    with pytest.raises(shardplan.NotFound) as ei:
        client.plan(mlp_json, mesh="no_such_mesh")
    assert ei.value.path == "/mesh"
    bad = copy.deepcopy(mlp_json)
    bad["ops"][0]["operands"][0] = "nowhere"
    with pytest.raises(shardplan.BadRequest) as ei:
        client.plan(bad)
    assert ei.value.path == "/graph/ops/0/operands/0", "pointers start at the envelope's root"
    with pytest.raises(shardplan.BadRequest) as ei:
        client.plan("module {\n  func.func @main( {\n}")
    assert ":" in ei.value.path
    with pytest.raises(shardplan.NotFound) as ei:
        client.plan_graph(987654)
    assert ei.value.path == "/graph_id"


def test_get_list_delete_plans(client: shardplan.Client, mlp_plan: shardplan.Plan) -> None:
    got = client.get_plan(mlp_plan.id)
    assert got is not None and got.hash == mlp_plan.hash and got.etag == f'"{mlp_plan.hash}"'
    assert got.plan.functions[0].inputs[0].sharding.text == mlp_plan.inputs[0].sharding.text
    assert client.get_plan(mlp_plan.id, if_none_match=got.etag) is None
    assert client.get_plan(mlp_plan, if_none_match='"other"') is not None
    mlir = client.get_plan_mlir(mlp_plan.id)
    assert mlir.startswith("module @") and "sdy.sharding" in mlir
    page = client.list_plans(limit=2)
    assert isinstance(page, shardplan.Page) and len(page.items) <= 2
    assert all(isinstance(x, shardplan.PlanSummary) for x in page)
    mine = list(client.iter_plans(graph_id=mlp_plan.graph_id, limit=1))
    assert mlp_plan.id in [x.id for x in mine] and all(x.graph_id == mlp_plan.graph_id for x in mine)
    with pytest.raises(shardplan.BadRequest) as ei:
        client.list_plans(graph_id=0)
    assert ei.value.path == "/graph_id"
    victim = client.plan(FakeLowered(JIT_F.replace("tanh", "negate")))
    client.delete_plan(victim)
    with pytest.raises(shardplan.NotFound) as ei:
        client.get_plan(victim.id)
    assert ei.value.path == "/id"
    with pytest.raises(shardplan.NotFound):
        client.delete_plan(victim.id)


def test_cost(client: shardplan.Client, mlp_plan: shardplan.Plan) -> None:
    c = client.cost(mlp_plan)
    assert isinstance(c, shardplan.Cost) and c.mode == "explicit" and c.profile == "cpu-local"
    assert c.devices == 8 and c.communication.n_collectives == len(c.communication.collectives)
    assert all(isinstance(x.bytes, int) for x in c.communication.collectives)
    tpu = client.cost(mlp_plan.id, profile="tpu-v5e")
    assert tpu.profile == "tpu-v5e" and tpu.time.step_s != c.time.step_s
    with pytest.raises(shardplan.BadRequest) as ei:
        client.cost(mlp_plan, profile="no-such-profile")
    assert ei.value.path == "/profile"
    with pytest.raises(shardplan.NotFound):
        client.cost(987654)


def test_memory(client: shardplan.Client, mlp_plan: shardplan.Plan) -> None:
    m = client.memory(mlp_plan, points=50)
    assert isinstance(m, shardplan.MemoryTimeline) and m.devices == 8
    assert m.parameter_bytes > 0 and 0 < len(m.points) <= 50
    assert isinstance(m.peak, shardplan.MemoryPeak) and m.peak.bytes >= m.parameter_bytes
    assert m.peak.op and m.largest_buffers  # the partitioned program: a collective may peak
    cost = client.cost(mlp_plan)
    assert m.peak.bytes == cost.memory.peak_bytes
    with pytest.raises(shardplan.NotFound):
        client.memory(987654)


def test_lint_and_collectives(client: shardplan.Client, mlp_plan: shardplan.Plan) -> None:
    demo = client.plan((EXAMPLES / "lint_demo.mlir").read_text(), name="lint-demo")
    rep = client.lint(demo)
    kinds = {f.kind for f in rep.findings}
    assert {"non_divisible", "custom_call_no_rule"} <= kinds
    assert rep.counts["non_divisible"] >= 1 and rep.profile == "cpu-local"
    f = next(x for x in rep.findings if x.kind == "non_divisible")
    assert f.severity == "warning" and f.line > 0 and f.fix is not None
    assert f.fix.jax and f.fix.shardy  # wording: issue 22's JAX-terms work changes it
    quiet = client.lint(demo, min_bytes=1 << 40)
    assert len(quiet.findings) < len(rep.findings)
    with pytest.raises(shardplan.BadRequest) as ei:
        client.lint(demo, min_bytes=-1)
    assert ei.value.path == "/min_bytes"
    cols = client.collectives(mlp_plan)
    assert len(cols) >= 1 and all(isinstance(x, shardplan.Collective) for x in cols)
    first = cols.collectives[0]
    assert first.kind == "all_reduce" and first.axes == ["model"] and first.cause
    with pytest.raises(shardplan.NotFound):
        client.collectives(987654)


def test_suggest(client: shardplan.Client) -> None:
    p = client.plan((EXAMPLES / "suggest_mlp.mlir").read_text(), name="suggest-mlp")
    s = client.suggest(p, k=2, max_candidates=8)
    assert s.objective == "time" and s.baseline is not None and s.evaluated <= 8
    assert 1 <= len(s.suggestions) <= 2
    top = s.suggestions[0]
    assert top.rank == 1 and top.edits and top.fix is not None and top.predicted is not None
    assert top.predicted.step_s < s.baseline.step_s
    mem = client.suggest(p.id, objective="memory", k=1, max_candidates=4)
    assert mem.objective == "memory"
    with pytest.raises(shardplan.BadRequest) as ei:
        client.suggest(p, k=1000)
    assert ei.value.path == "/k"
    with pytest.raises(shardplan.BadRequest) as ei:
        client.suggest(p, objective="speed")
    assert ei.value.path == "/objective"


def test_whatif(client: shardplan.Client, mlp_plan: shardplan.Plan) -> None:
    edit = {"kind": "constrain", "value": {"op": "/ops/0"}, "sharding": "<@mesh, [{}, {}]>"}
    w = client.whatif(mlp_plan, [edit])
    assert isinstance(w, shardplan.WhatIfResult) and w.edits == 1 and w.n_changed >= 1
    assert w.changed[0].after == "<@mesh, [{}, {}]>" and w.changed[0].before
    assert w.cost is not None and w.cost.before is not None and w.cost.after is not None
    assert w.cost.after.comm_bytes >= w.cost.before.comm_bytes
    assert w.mlir.startswith("module") and w.plan_id in (None, 0)
    saved = client.whatif(mlp_plan.id, [edit], save=True, profile="tpu-v5e")
    assert saved.plan_id and saved.plan_id != mlp_plan.id
    sp = client.get_plan(saved.plan_id)
    assert sp is not None and sp.name == f"what-if of plan {mlp_plan.id}"
    with pytest.raises(shardplan.BadRequest) as ei:
        client.whatif(mlp_plan, [{"kind": "bogus"}])
    assert ei.value.path == "/edits/0/kind"
    with pytest.raises(shardplan.BadRequest):
        client.whatif(mlp_plan, [edit], profile="no-such-profile")


def test_compare(client: shardplan.Client, mlp_json: dict, mlp_plan: shardplan.Plan) -> None:
    other = client.plan(mlp_json, pass_="sdy-basic-propagate")
    c = client.compare([mlp_plan, other.id])
    assert c.format == "shardplan.compare/v1" and len(c.plans) == 2
    assert str(mlp_plan.id) in c.plans[0].file and str(other.id) in c.plans[1].file
    assert all(x.cost is not None and x.cost.devices == 8 for x in c.plans)
    assert c.compared_tensors > 0 and isinstance(c.differences, list)
    prof = client.compare([mlp_plan.id, other.id], profile="tpu-v5e")
    assert prof.plans[0].cost.profile == "tpu-v5e"
    with pytest.raises(shardplan.BadRequest) as ei:
        client.compare([mlp_plan.id])
    assert ei.value.path == "/plans"
    with pytest.raises(shardplan.NotFound) as ei:
        client.compare([mlp_plan.id, 987654])
    assert ei.value.path == "/plans/1"


def test_sweep(client: shardplan.Client) -> None:
    s = client.sweep(devices=8, layers=1, strategies=["dp", "dp+tp"])
    assert isinstance(s, shardplan.SweepResult) and s.rows and s.variants == len(s.rows)
    assert {r.strategy for r in s.rows} <= {"dp", "dp+tp"}
    assert "dp+tp" in {r.strategy for r in s.rows}, "a '+' in a query is escaped"
    best = s.best
    assert best is not None and best.rank == 1 and isinstance(best.peak_bytes, int)
    assert any(r.pareto for r in s.rows)
    t = client.sweep(devices=4, layers=1, strategies="fsdp", train=True)
    assert {r.strategy for r in t.rows} == {"fsdp"}
    with pytest.raises(shardplan.BadRequest) as ei:
        client.sweep(devices=0)
    assert ei.value.path == "/devices"
    with pytest.raises(shardplan.BadRequest) as ei:
        client.sweep(strategies="zero")
    assert ei.value.path == "/strategies"


def test_sweep_plan(client: shardplan.Client, mlp_json: dict) -> None:
    p = client.plan(mlp_json)
    s = client.sweep_plan(p, devices=4)
    assert isinstance(s, shardplan.SweepResult) and s.mesh_name == "mesh"
    assert s.variants == 3 and len(s.rows) == 3
    assert all(set(r.mesh) == {"data", "model"} for r in s.rows)
    assert sorted(r.mesh["data"] * r.mesh["model"] for r in s.rows) == [4, 4, 4]
    assert s.best is not None and s.best.rank == 1 and not s.best.strategy
    own = client.sweep_plan(p.id)
    assert own.variants == 4, "default: the mesh's own 8 devices"
    with pytest.raises(shardplan.BadRequest) as ei:
        client.sweep_plan(p, mesh="nope")
    assert ei.value.path == "/mesh"
    with pytest.raises(shardplan.BadRequest) as ei:
        client.sweep_plan(p, devices=5000)
    assert ei.value.path == "/devices"
    rules = client.sweep_plan(p, logical_rules=True)
    assert rules.logical_names == 3 and rules.variants_of == "every assignment"
    assert len(rules.rows) == 27 and sum(r.own for r in rules.rows) == 1
    own = next(r for r in rules.rows if r.own)
    assert own.rules == [["batch", "data"], ["hidden", "model"]]
    assert all(r.mesh == {"data": 2, "model": 4} for r in rules.rows)
