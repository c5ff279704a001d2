"""Shardplan's Python client: plan how a model is sharded over a device mesh.

Standard library only; Python >= 3.9. The package never imports jax: give
:meth:`Client.plan` a ``jax.stages.Lowered`` (anything with ``as_text()``),
MLIR text or a graph document, and read the answer in typed dataclasses::

    import shardplan
    client = shardplan.Client("http://127.0.0.1:8080")
    plan = client.plan(jax.jit(f).lower(x), name="f")
    for t in plan.inputs:
        print(t.label, t.sharding.spec_text() if t.sharding else "unsharded")

Errors are :class:`ShardplanError` subclasses with the server's ``code``,
``message`` and ``path``. See docs/python.md in the repository.
"""

from .client import Client, Response
from .errors import (
    BadRequest,
    BenchmarkFailed,
    Conflict,
    Forbidden,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    PlanTimeout,
    ServerError,
    ShardplanError,
    TransportError,
    Unauthorized,
    Unavailable,
    UnsupportedMediaType,
    WaitTimeout,
)
from .types import (
    AxisRef,
    Benchmark,
    BenchmarkResults,
    Collective,
    CollectivesReport,
    Comparison,
    Cost,
    DimSharding,
    Finding,
    Migration,
    FunctionPlan,
    Graph,
    Health,
    LintReport,
    MemoryPeak,
    MemoryTimeline,
    Mesh,
    MeshAxis,
    NewToken,
    OpPlan,
    Page,
    Plan,
    PlanDocument,
    PlanSummary,
    Sharding,
    StoredDocument,
    Suggestion,
    SuggestReport,
    SweepResult,
    SweepRow,
    TensorPlan,
    Token,
    WhatIfResult,
)

__version__ = "0.1.0"

__all__ = [
    "Client",
    "Response",
    "BadRequest",
    "BenchmarkFailed",
    "Conflict",
    "Forbidden",
    "MethodNotAllowed",
    "NotFound",
    "PayloadTooLarge",
    "PlanTimeout",
    "ServerError",
    "ShardplanError",
    "TransportError",
    "Unauthorized",
    "Unavailable",
    "UnsupportedMediaType",
    "WaitTimeout",
    "AxisRef",
    "Benchmark",
    "BenchmarkResults",
    "Collective",
    "CollectivesReport",
    "Comparison",
    "Cost",
    "DimSharding",
    "Finding",
    "Migration",
    "FunctionPlan",
    "Graph",
    "Health",
    "LintReport",
    "MemoryPeak",
    "MemoryTimeline",
    "Mesh",
    "MeshAxis",
    "NewToken",
    "OpPlan",
    "Page",
    "Plan",
    "PlanDocument",
    "PlanSummary",
    "Sharding",
    "StoredDocument",
    "Suggestion",
    "SuggestReport",
    "SweepResult",
    "SweepRow",
    "TensorPlan",
    "Token",
    "WhatIfResult",
]
