"""Benchmarks (wait with a progress callback, idempotency, cancel, /v1/runs) and tokens."""

from __future__ import annotations

from typing import List

import pytest

import shardplan
from conftest import Server


def test_benchmark_wait_with_progress(client: shardplan.Client, mlp_plan: shardplan.Plan) -> None:
    seen: List[shardplan.Benchmark] = []
    run = client.benchmark(mlp_plan, iters=2, warmup=0, seed=3, wait=True, progress=seen.append,
                           poll_interval=0.05, wait_timeout=120)
    assert run.status == "succeeded" and run.done and run.progress == 1
    assert seen and seen[0].status in ("queued", "running") and seen[-1].status == "succeeded"
    progress = [r.progress for r in seen]
    assert progress == sorted(progress), "progress never goes back"
    assert all(r.id == run.id for r in seen)
    res = run.results
    assert isinstance(res, shardplan.BenchmarkResults)
    assert res.iters == 2 and res.warmup == 0 and res.seed == 3 and res.devices == 8
    assert len(res.iter_s) == 2 and res.step_s > 0 and isinstance(res.flops, int)
    assert res.numerics["match"] is True and res.predicted_step_s > 0
    assert res.collectives and res.collectives[0]["kind"] == "all_reduce"
    got = client.get_benchmark(run.id)
    assert got.status == "succeeded" and got.results is not None and got.spec == {
        "iters": 2, "warmup": 0, "seed": 3}
    assert run.id in [r.id for r in client.list_benchmarks(status="succeeded", plan_id=mlp_plan.id)]
    assert all(r.results is None for r in client.list_benchmarks())
    assert run.id in [r.id for r in client.iter_benchmarks(limit=1)]
    with pytest.raises(shardplan.Conflict) as ei:
        client.cancel_benchmark(run.id)
    assert ei.value.path == "/status"


def test_benchmark_no_wait_and_wait_later(client: shardplan.Client, mlp_plan: shardplan.Plan) -> None:
    run = client.benchmark(mlp_plan.id, iters=1, warmup=0)
    assert run.status in ("queued", "running", "succeeded") and run.plan_id == mlp_plan.id
    final = client.wait_benchmark(run, poll_interval=0.05, timeout=120)
    assert final.status == "succeeded"


def test_benchmark_idempotency(client: shardplan.Client, mlp_plan: shardplan.Plan) -> None:
    a = client.benchmark(mlp_plan, iters=1, warmup=0, idempotency_key="py-nightly-1")
    b = client.benchmark(mlp_plan, iters=1, warmup=0, idempotency_key="py-nightly-1")
    assert b.id == a.id and b.replayed and not a.replayed
    with pytest.raises(shardplan.Conflict) as ei:
        client.benchmark(mlp_plan, iters=2, warmup=0, idempotency_key="py-nightly-1")
    assert ei.value.status == 409 and ei.value.code == "conflict"
    client.wait_benchmark(a, poll_interval=0.05, timeout=120)


def test_benchmark_failed_and_canceled(client: shardplan.Client, mlp_plan: shardplan.Plan) -> None:
    # the executor needs the mesh's device count: 2 workers for 8 devices fail
    with pytest.raises(shardplan.BenchmarkFailed) as ei:
        client.benchmark(mlp_plan, devices=2, iters=1, warmup=0, wait=True, poll_interval=0.05,
                         wait_timeout=120)
    run = ei.value.run
    assert isinstance(run, shardplan.Benchmark) and run.status == "failed" and run.error
    assert ei.value.code == "failed" and run.error in str(ei.value)
    slow = client.benchmark(mlp_plan, iters=100000, warmup=0)
    canceled = client.cancel_benchmark(slow)
    assert canceled.status == "canceled" and canceled.error == "canceled by request"
    with pytest.raises(shardplan.BenchmarkFailed) as ei:
        client.wait_benchmark(slow.id, poll_interval=0.05, timeout=60)
    assert ei.value.run.status == "canceled"
    client.delete_benchmark(slow)
    with pytest.raises(shardplan.NotFound):
        client.get_benchmark(slow.id)


def test_benchmark_wait_timeout(client: shardplan.Client, mlp_plan: shardplan.Plan) -> None:
    run = client.benchmark(mlp_plan, iters=100000, warmup=0)
    with pytest.raises(shardplan.WaitTimeout) as ei:
        client.wait_benchmark(run, poll_interval=0.05, timeout=0.2)
    assert ei.value.run.status in ("queued", "running")
    client.delete_benchmark(run)  # cancels it first


def test_benchmark_errors(client: shardplan.Client, mlp_plan: shardplan.Plan) -> None:
    with pytest.raises(shardplan.BadRequest) as ei:
        client.benchmark(mlp_plan, iters=0)
    assert ei.value.path == "/iters"
    with pytest.raises(shardplan.NotFound) as ei:
        client.benchmark(987654)
    assert ei.value.path == "/plan_id"
    with pytest.raises(shardplan.BadRequest) as ei:
        client.benchmark(mlp_plan, webhook_url="http://example.com/hook")
    assert ei.value.path == "/webhook_url"
    with pytest.raises(shardplan.BadRequest) as ei:
        client.list_benchmarks(status="sleeping")
    assert ei.value.path == "/status"
    with pytest.raises(shardplan.NotFound):
        client.get_benchmark(987654)


def test_runs_collection(client: shardplan.Client, mlp_plan: shardplan.Plan) -> None:
    run = client.create_run(mlp_plan, spec={"iters": 1, "warmup": 0})
    assert run.plan_id == mlp_plan.id and run.spec == {"iters": 1, "warmup": 0}
    assert client.get_run(run.id).id == run.id
    assert run.id in [r.id for r in client.list_runs(plan_id=mlp_plan.id, limit=1000)]
    done = client.wait_benchmark(run, poll_interval=0.05, timeout=120)
    assert done.status == "succeeded"
    client.delete_run(run)
    with pytest.raises(shardplan.NotFound):
        client.get_run(run.id)


def test_tokens_and_scopes(auth_server: Server, mlp_json: dict) -> None:
    url = auth_server.url
    anon = shardplan.Client(url)
    assert anon.health().status == "ok", "/healthz needs no token"
    with pytest.raises(shardplan.Unauthorized) as ei:
        anon.list_plans()
    assert ei.value.status == 401 and ei.value.code == "unauthorized"
    with pytest.raises(shardplan.Unauthorized):
        shardplan.Client(url, token="spt_0000").list_plans()
    admin = shardplan.Client(url, token=auth_server.admin)  # type: ignore[attr-defined]
    new = admin.create_token("read", label="py-reader")
    assert isinstance(new, shardplan.NewToken) and new.token.startswith("spt_")
    assert new.scope == "read" and new.label == "py-reader"
    listed = admin.list_tokens()
    mine = [t for t in listed if t.id == new.id]
    assert mine and mine[0].scope == "read" and new.token.startswith(mine[0].prefix)
    assert all(not hasattr(t, "token") for t in listed)
    reader = shardplan.Client(url, token=new.token)
    assert isinstance(reader.list_plans(), shardplan.Page)
    with pytest.raises(shardplan.Forbidden) as ei:
        reader.plan(mlp_json)
    assert ei.value.status == 403 and "write" in ei.value.message
    with pytest.raises(shardplan.Forbidden):
        reader.list_tokens()
    writer = shardplan.Client(url, token=admin.create_token("write").token)
    p = writer.plan(mlp_json)
    assert reader.get_plan(p.id) is not None
    with pytest.raises(shardplan.BadRequest) as ei:
        admin.create_token("root")
    assert ei.value.path == "/scope"
    admin.delete_token(new)
    with pytest.raises(shardplan.Unauthorized):
        reader.list_plans()
    with pytest.raises(shardplan.NotFound):
        admin.delete_token(new.id)
