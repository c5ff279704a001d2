"""GET /v1/benchmarks/{id}/trace (Client.trace): the run's timeline in the Chrome
trace event format, checked against the format's required fields."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

import shardplan


def test_trace_event_format(client: shardplan.Client, mlp_plan: shardplan.Plan) -> None:
    run = client.benchmark(mlp_plan, iters=2, warmup=1, wait=True, poll_interval=0.05,
                           wait_timeout=120)
    assert run.status == "succeeded"
    trace = json.loads(json.dumps(client.trace(run)))  # plain JSON, as a file would hold it
    events = trace["traceEvents"]
    assert isinstance(events, list) and events
    for e in events:
        for key in ("name", "ph", "ts", "pid", "tid"):
            assert key in e, f"event without {key}: {e}"
        assert isinstance(e["name"], str) and e["name"]
        assert e["ph"] in ("X", "M")
        assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        if e["ph"] == "X":
            assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0
    xs = [e for e in events if e["ph"] == "X"]
    devices = run.results.devices
    assert {e["tid"] for e in xs} == set(range(devices)), "a lane per device"
    names = {e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert names == {f"device {d}" for d in range(devices)}
    # ops named by the graph's value names, not value numbers
    assert any(e["name"] == "dot_general l0.h" for e in xs)
    assert not any(e["name"].split(" ")[-1].startswith("v") and e["name"].split(" ")[-1][1:].isdigit()
                   for e in xs)
    colls = [e for e in xs if e["cat"] == "collective"]
    assert colls and all(e["args"]["collective"] == "all_reduce" for e in colls)
    assert all(e["args"]["axes"] and all(isinstance(a, str) for a in e["args"]["axes"]) for e in colls)
    # on each device, events do not run backwards and waits sit inside their collective
    by_dev = defaultdict(list)
    for e in xs:
        if e["cat"] != "collective,wait":
            by_dev[e["tid"]].append(e)
    for d, evs in by_dev.items():
        starts = [e["ts"] for e in evs]
        assert starts == sorted(starts), f"device {d} out of order"
    assert trace["otherData"]["devices"] == devices and trace["otherData"]["run_id"] == run.id
    # the stored timeline in the results is what the trace was made from
    assert run.results.timeline and len(run.results.timeline["events"]) == sum(
        len(v) for v in by_dev.values())


def test_trace_of_an_unknown_run(client: shardplan.Client) -> None:
    with pytest.raises(shardplan.NotFound):
        client.trace(999999)
