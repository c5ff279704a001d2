"""Typed results of the Shardplan API.

Each class mirrors one JSON answer of the server (docs/api.md,
server/openapi.json). Fields are named after the JSON members; every
instance also keeps the full decoded JSON in ``raw`` (not shown in its
repr), so members this version of the package does not know are still at
hand. Counts (bytes, FLOPs) are ``int``; times are ``float`` seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Generic, Iterator, List, Optional, Tuple, TypeVar, Union

T = TypeVar("T")

_Raw = Dict[str, Any]


def _raw() -> Any:
    return field(default_factory=dict, repr=False, compare=False)


# ---- health ------------------------------------------------------------------------------------


@dataclass
class Health:
    """``GET /healthz`` (``status`` "ok") or ``GET /readyz`` ("ready", with the store's schema)."""

    status: str = ""
    schema_version: Optional[int] = None
    raw: _Raw = _raw()


# ---- pages -------------------------------------------------------------------------------------


@dataclass
class Page(Generic[T]):
    """One page of a list: ``items`` and ``next_after``, the ``after`` of the next page (0: last)."""

    items: List[T] = field(default_factory=list)
    next_after: int = 0

    def __iter__(self) -> Iterator[T]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


# ---- graphs and named documents ----------------------------------------------------------------


@dataclass
class Graph:
    """A stored graph: a graph document (``format`` "json") or MLIR text ("mlir").

    ``graph`` (the document) or ``mlir`` (the text) is set by
    :meth:`Client.get_graph`; lists and ``submit_graph`` give metadata only.
    ``created`` (``submit_graph`` only) is True when this request stored it;
    when it was stored before, ``existed`` is True, ``message`` says under
    which name, and ``alias_recorded`` is the new name recorded for it (the
    name ``?name=`` gave, when it differs from every name the graph has).
    ``aliases`` are the other names the graph was sent under.
    """

    id: int = 0
    name: str = ""
    format: str = ""
    hash: str = ""
    size: int = 0
    created_at: int = 0
    aliases: List[str] = field(default_factory=list)
    graph: Optional[Dict[str, Any]] = None
    mlir: Optional[str] = None
    existed: bool = False
    alias_recorded: Optional[str] = None
    message: str = ""
    created: bool = field(default=False, metadata={"key": "-created"})
    raw: _Raw = _raw()


@dataclass
class StoredDocument:
    """A stored mesh, rule or profile.

    ``body`` is the document itself (the JSON member ``mesh``, ``rule`` or
    ``profile``) when the answer carries it; lists give metadata only.
    ``created`` (``put_*`` only) is True when the name was new (201).
    """

    id: int = 0
    name: str = ""
    created_at: int = 0
    updated_at: int = 0
    body: Any = None
    created: bool = field(default=False, metadata={"key": "-created"})
    raw: _Raw = _raw()


# ---- the plan document -------------------------------------------------------------------------


@dataclass
class AxisRef:
    """A sub-axis in a sharding: ``size`` devices of axis ``name`` after the first ``pre_size``."""

    name: str = ""
    pre_size: int = 1
    size: int = 1

    def __str__(self) -> str:
        return f"{self.name}:({self.pre_size}){self.size}"


@dataclass
class DimSharding:
    """The sharding of one tensor dimension: its axes, major first.

    An entry of ``axes`` is an axis name or an :class:`AxisRef` for a sub-axis.
    ``closed`` false means propagation may add axes; ``priority`` is Shardy's
    ``p<N>`` when the dimension has one.
    """

    axes: List[Union[str, AxisRef]] = field(default_factory=list)
    closed: bool = True
    priority: Optional[int] = None

    def __post_init__(self) -> None:
        self.axes = [
            AxisRef(a.get("name", ""), int(a.get("pre_size", 1)), int(a.get("size", 1)))
            if isinstance(a, dict)
            else a
            for a in self.axes
        ]


@dataclass
class Sharding:
    """A tensor's sharding: Shardy's text (``<@mesh, [{"data"}, {}]>``), the mesh, the dimensions."""

    text: str = ""
    mesh: str = ""
    dims: List[DimSharding] = field(default_factory=list)
    replicated: List[Any] = field(default_factory=list)
    unreduced: List[Any] = field(default_factory=list)
    raw: _Raw = _raw()

    @property
    def has_sub_axes(self) -> bool:
        """Whether a dimension is sharded over a sub-axis (``"data":(1)2``), which no PartitionSpec says."""
        return any(isinstance(a, AxisRef) for d in self.dims for a in d.axes)

    def partition_spec(self) -> Tuple[Any, ...]:
        """The sharding as the entries of a JAX ``PartitionSpec``, one per dimension.

        ``None`` for a replicated dimension, the axis name for one axis, a
        tuple of names for several: ``('data', None)``, ``(('data', 'model'),)``;
        ``()`` for a scalar. A sub-axis has no PartitionSpec spelling: it is
        given as its Shardy text (``'data:(1)2'``); check :attr:`has_sub_axes`.
        Pass the result to ``jax.sharding.PartitionSpec(*spec)``.
        """
        out: List[Any] = []
        for d in self.dims:
            names = [str(a) for a in d.axes]
            out.append(None if not names else names[0] if len(names) == 1 else tuple(names))
        return tuple(out)

    def spec_text(self) -> str:
        """The sharding as JAX source, ``P('data', None)``; sub-axes spelled as Shardy does."""
        parts = []
        for entry in self.partition_spec():
            if entry is None:
                parts.append("None")
            elif isinstance(entry, tuple):
                parts.append("(" + ", ".join(repr(e) for e in entry) + ",)" if len(entry) == 1
                             else "(" + ", ".join(repr(e) for e in entry) + ")")
            else:
                parts.append(repr(entry))
        return "P(" + ", ".join(parts) + ")"


@dataclass
class TensorPlan:
    """A function input or output, or an op result, with the sharding the planner gave it.

    ``local_shape`` is the per-device shape; ``origin`` maps each axis to
    where it came from (``"self"``, ``"input: 2"``, ...).
    """

    index: int = 0
    name: Optional[str] = None
    type: str = ""
    shape: List[int] = field(default_factory=list)
    sharding: Optional[Sharding] = None
    local_shape: List[int] = field(default_factory=list)
    origin: Optional[Dict[str, Any]] = None
    raw: _Raw = _raw()

    @property
    def label(self) -> str:
        """The tensor's name, else its index."""
        return self.name if self.name else f"#{self.index}"


@dataclass
class OpPlan:
    """One op of a planned function: its path (``/ops/3``), op name, sharding rule and results."""

    path: str = ""
    op: str = ""
    rule: Optional[str] = None
    loc_name: Optional[str] = None
    results: List[TensorPlan] = field(default_factory=list)
    raw: _Raw = _raw()


@dataclass
class FunctionPlan:
    """One function of the plan with its inputs, outputs and ops."""

    name: str = ""
    path: str = ""
    inputs: List[TensorPlan] = field(default_factory=list)
    outputs: List[TensorPlan] = field(default_factory=list)
    ops: List[OpPlan] = field(default_factory=list)
    raw: _Raw = _raw()


@dataclass
class MeshAxis:
    """One axis of a mesh."""

    name: str = ""
    size: int = 0


@dataclass
class Mesh:
    """A device mesh: named axes, major first, and its device count."""

    name: str = ""
    axes: List[MeshAxis] = field(default_factory=list)
    devices: int = 0
    raw: _Raw = _raw()

    @property
    def shape(self) -> Dict[str, int]:
        """``{"data": 2, "model": 4}``."""
        return {a.name: a.size for a in self.axes}


@dataclass
class Diagnostic:
    """A planner diagnostic: ``severity``, ``kind``, the ``path`` it is about and the message."""

    severity: str = ""
    kind: str = ""
    path: str = ""
    message: str = ""
    raw: _Raw = _raw()


@dataclass
class MemoryCost:
    """Per-device memory of a plan, in bytes."""

    parameter_bytes: int = 0
    input_bytes: int = 0
    output_bytes: int = 0
    peak_activation_bytes: int = 0
    peak_bytes: int = 0
    capacity_bytes: int = 0
    fits: bool = True
    message: str = ""


@dataclass
class FlopsCost:
    """Per-device FLOPs of one step, by kind."""

    total: int = 0
    dot: int = 0
    elementwise: int = 0
    reduce: int = 0
    other: int = 0


@dataclass
class CollectiveCost:
    """One collective as the cost model counts it (``bytes`` per device on the wire)."""

    op: str = ""
    kind: str = ""
    implied: bool = False
    axes: List[Any] = field(default_factory=list)
    group: int = 0
    tensor_bytes: int = 0
    bytes: int = 0
    seconds: float = 0.0


@dataclass
class CommunicationCost:
    """Communication of one step: totals, per mesh axis and per collective."""

    bytes: int = 0
    seconds: float = 0.0
    per_axis: List[Dict[str, Any]] = field(default_factory=list)
    n_collectives: int = 0
    collectives: List[CollectiveCost] = field(default_factory=list)


@dataclass
class TimeCost:
    """Predicted step time: compute, communication, their overlap, the step."""

    compute_s: float = 0.0
    communication_s: float = 0.0
    overlap: float = 0.0
    hidden_s: float = 0.0
    step_s: float = 0.0


@dataclass
class Cost:
    """The cost model's per-device estimate (docs/cost-model.md)."""

    mode: str = ""
    note: str = ""
    profile: str = ""
    devices: int = 0
    ops: int = 0
    memory: MemoryCost = field(default_factory=MemoryCost)
    flops: FlopsCost = field(default_factory=FlopsCost)
    memory_traffic_bytes: int = 0
    communication: CommunicationCost = field(default_factory=CommunicationCost)
    time: TimeCost = field(default_factory=TimeCost)
    raw: _Raw = _raw()


@dataclass
class MemoryPeak:
    """The peak of a memory timeline: bytes, the op there (its index, name and source)."""

    bytes: int = 0
    index: int = 0
    activation_bytes: int = 0
    temporary_bytes: int = 0
    op: str = ""
    name: Optional[str] = None
    source: Optional[str] = None
    raw: _Raw = _raw()


@dataclass
class MemoryTimeline:
    """``GET /v1/plans/{id}/memory``: live bytes per device over program order, the peak
    and its op, and the largest buffers live there (docs/cost-model.md)."""

    devices: int = 0
    parameter_bytes: int = 0
    input_bytes: int = 0
    capacity_bytes: int = 0
    peak: MemoryPeak = field(default_factory=MemoryPeak)
    largest_buffers: List[Dict[str, Any]] = field(default_factory=list)
    n_ops: int = 0
    stride: int = 0
    points: List[Dict[str, Any]] = field(default_factory=list)
    raw: _Raw = _raw()


@dataclass
class PlanDocument:
    """The plan document (``shardplan.plan/v1``): meshes, functions with shardings, diagnostics, cost."""

    format: str = ""
    input_sha256: str = ""
    pass_: str = field(default="", metadata={"key": "pass"})
    meshes: List[Mesh] = field(default_factory=list)
    functions: List[FunctionPlan] = field(default_factory=list)
    diagnostics: List[Diagnostic] = field(default_factory=list)
    cost: Optional[Cost] = None
    raw: _Raw = _raw()


@dataclass
class PlanSummary:
    """A plan in a list: its id, hash, graph, mesh, options and the document's size."""

    id: int = 0
    hash: str = ""
    graph_id: int = 0
    mesh_id: int = 0
    options: Dict[str, Any] = field(default_factory=dict)
    size: int = 0
    created_at: int = 0
    raw: _Raw = _raw()

    @property
    def name(self) -> str:
        """The plan's name (``options.name``)."""
        return str(self.options.get("name", ""))


@dataclass
class Plan:
    """A stored plan: the envelope of ``POST /v1/plans`` and ``GET /v1/plans/{id}``.

    ``plan`` is the plan document; ``options`` holds the ``pass``, the
    ``mesh`` applied and the ``name``. ``created`` is True when this request
    computed the plan (201) and False when an equal stored plan answered
    (200); ``etag`` is the reply's ETag when it had one.
    """

    id: int = 0
    hash: str = ""
    graph_id: int = 0
    mesh_id: int = 0
    options: Dict[str, Any] = field(default_factory=dict)
    created_at: int = 0
    plan: PlanDocument = field(default_factory=PlanDocument)
    created: bool = field(default=False, metadata={"key": "-created"})
    etag: Optional[str] = field(default=None, metadata={"key": "-etag"})
    raw: _Raw = _raw()

    @property
    def name(self) -> str:
        """The plan's name: ``name=``, the graph document's name or the module's ``@NAME``."""
        return str(self.options.get("name", ""))

    @property
    def main(self) -> FunctionPlan:
        """The function called ``main`` (else the first)."""
        fns = self.plan.functions
        for f in fns:
            if f.name == "main":
                return f
        if not fns:
            raise ValueError(f"plan {self.id} has no functions")
        return fns[0]

    @property
    def inputs(self) -> List[TensorPlan]:
        """The main function's inputs."""
        return self.main.inputs

    @property
    def outputs(self) -> List[TensorPlan]:
        """The main function's outputs."""
        return self.main.outputs

    @property
    def cost(self) -> Optional[Cost]:
        """The cost the plan document carries (unpartitioned, ``mode`` "implied")."""
        return self.plan.cost

    def in_specs(self) -> List[Tuple[Any, ...]]:
        """Each main input's :meth:`Sharding.partition_spec` (``()`` when it has no sharding)."""
        return [t.sharding.partition_spec() if t.sharding else () for t in self.inputs]

    def out_specs(self) -> List[Tuple[Any, ...]]:
        """Each main output's :meth:`Sharding.partition_spec` (``()`` when it has no sharding)."""
        return [t.sharding.partition_spec() if t.sharding else () for t in self.outputs]


# ---- advisors ----------------------------------------------------------------------------------


@dataclass
class Fix:
    """A suggested change, as Shardy text and as JAX source."""

    shardy: str = ""
    jax: str = ""
    raw: _Raw = _raw()


@dataclass
class Finding:
    """One lint finding (docs/advisor.md): kind, severity, where, how many bytes, message, fix."""

    kind: str = ""
    severity: str = ""
    op: str = ""
    line: int = 0
    loc: str = ""
    source: str = ""
    value: str = ""
    bytes: int = 0
    message: str = ""
    fix: Optional[Fix] = None
    raw: _Raw = _raw()


@dataclass
class LintReport:
    """``GET /v1/plans/{id}/lint``: findings, counts by kind, peak and capacity bytes."""

    findings: List[Finding] = field(default_factory=list)
    counts: Dict[str, int] = field(default_factory=dict)
    peak_bytes: int = 0
    capacity_bytes: int = 0
    profile: str = ""
    raw: _Raw = _raw()


@dataclass
class Collective:
    """One collective of the partitioned plan and why it is there."""

    op: str = ""
    kind: str = ""
    axes: List[Any] = field(default_factory=list)
    group: int = 0
    tensor_bytes: int = 0
    bytes: int = 0
    seconds: float = 0.0
    count: int = 0
    for_op: str = ""
    line: int = 0
    loc: str = ""
    source: str = ""
    cause: str = ""
    raw: _Raw = _raw()


@dataclass
class CollectivesReport:
    """``GET /v1/plans/{id}/collectives``."""

    collectives: List[Collective] = field(default_factory=list)
    raw: _Raw = _raw()

    def __iter__(self) -> Iterator[Collective]:
        return iter(self.collectives)

    def __len__(self) -> int:
        return len(self.collectives)


@dataclass
class Estimate:
    """Predicted step time, peak memory and communication of one variant."""

    step_s: float = 0.0
    peak_bytes: int = 0
    comm_bytes: int = 0
    collectives: Optional[int] = None


@dataclass
class Suggestion:
    """A constraint that cuts predicted time or memory: its edits, the fix, prediction and gain."""

    rank: int = 0
    edits: List[Dict[str, Any]] = field(default_factory=list)
    label: str = ""
    op: str = ""
    line: int = 0
    loc: str = ""
    fix: Optional[Fix] = None
    predicted: Optional[Estimate] = None
    gain: Dict[str, Any] = field(default_factory=dict)
    raw: _Raw = _raw()


@dataclass
class SuggestReport:
    """``GET /v1/plans/{id}/suggest``."""

    objective: str = ""
    profile: str = ""
    baseline: Optional[Estimate] = None
    suggestions: List[Suggestion] = field(default_factory=list)
    candidates: int = 0
    evaluated: int = 0
    seconds: float = 0.0
    raw: _Raw = _raw()


@dataclass
class ShardingChange:
    """A value whose sharding a what-if edit changed."""

    value: Dict[str, Any] = field(default_factory=dict)
    label: str = ""
    before: Optional[str] = None
    after: Optional[str] = None
    raw: _Raw = _raw()


@dataclass
class WhatIfCost:
    """The cost before and after the edits."""

    before: Optional[Estimate] = None
    after: Optional[Estimate] = None


@dataclass
class WhatIfResult:
    """``POST /v1/plans/{id}/whatif``: the changed shardings, the region, the cost, the edited MLIR.

    ``plan_id`` is the stored plan of the edited module when ``save`` was asked.
    """

    edits: int = 0
    changed: List[ShardingChange] = field(default_factory=list)
    n_changed: int = 0
    region: Dict[str, Any] = field(default_factory=dict)
    seconds: Dict[str, float] = field(default_factory=dict)
    cost: Optional[WhatIfCost] = None
    mlir: str = ""
    plan_id: Optional[int] = None
    raw: _Raw = _raw()


@dataclass
class SweepRow:
    """One mesh x strategy variant of a sweep, ranked."""

    mesh: Dict[str, int] = field(default_factory=dict)
    strategy: str = ""
    ok: bool = True
    rank: int = 0
    step_s: float = 0.0
    peak_bytes: int = 0
    comm_bytes: int = 0
    flops: int = 0
    fits: bool = True
    capacity_bytes: int = 0
    pareto: bool = False
    error: Optional[str] = None
    rules: Optional[List[Any]] = None  # a rules sweep: the variant's logical_axis_rules
    own: bool = False  # a rules sweep: the document's own rules
    raw: _Raw = _raw()


@dataclass
class SweepResult:
    """``GET /v1/sweep``: meshes x strategies, ranked, with the Pareto front marked;
    ``GET /v1/plans/{id}/sweep``: the plan's own model over the meshes of a device
    count (``mesh_name`` re-sized, rows without a strategy)."""

    variants: int = 0
    ops_per_variant: int = 0
    plans: int = 0
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    profile: str = ""
    rows: List[SweepRow] = field(default_factory=list)
    mesh_name: Optional[str] = None
    device_ids_dropped: bool = False
    logical_names: int = 0  # a rules sweep: the logical axis names varied
    variants_of: Optional[str] = None  # "every assignment" or "one name at a time"
    raw: _Raw = _raw()

    @property
    def best(self) -> Optional[SweepRow]:
        """The first-ranked variant that planned."""
        ok = [r for r in self.rows if r.ok]
        return min(ok, key=lambda r: r.rank) if ok else None


@dataclass
class ComparedPlan:
    """One plan of a comparison: its label (``plans/ID``) and cost."""

    file: str = ""
    cost: Optional[Cost] = None
    raw: _Raw = _raw()


@dataclass
class Comparison:
    """``GET /v1/compare``: plans side by side, the tensors whose shardings differ."""

    format: str = ""
    plans: List[ComparedPlan] = field(default_factory=list)
    structure_differs: bool = False
    compared_tensors: int = 0
    first_divergence: Optional[Dict[str, Any]] = None
    differences: List[Dict[str, Any]] = field(default_factory=list)
    raw: _Raw = _raw()


@dataclass
class Migration:
    """A stored GSPMD -> Shardy migration report (``POST /v1/migrations``).

    ``report`` is what ``shardplan migrate --json`` prints (divergences,
    ``cost`` of both sides, ``fix``) and ``mlir`` the module as posted; both
    are set by :meth:`Client.migrate` and :meth:`Client.get_migration`,
    lists give metadata only. ``created`` (``migrate`` only) is True when
    this request stored it.
    """

    id: int = 0
    name: str = ""
    profile: str = ""
    hash: str = ""
    size: int = 0
    created_at: int = 0
    report: Optional[Dict[str, Any]] = None
    mlir: Optional[str] = None
    created: bool = field(default=False, metadata={"key": "-created"})
    raw: _Raw = _raw()


# ---- benchmarks --------------------------------------------------------------------------------


@dataclass
class BenchmarkResults:
    """What a succeeded run measured (docs/api.md, "Benchmark runs")."""

    devices: int = 0
    warmup: int = 0
    iters: int = 0
    seed: int = 0
    affinity: Optional[bool] = None
    iter_s: List[float] = field(default_factory=list)
    step_s: float = 0.0
    flops: int = 0
    flop_per_s: float = 0.0
    predicted_step_s: float = 0.0
    predicted_profile: Optional[Dict[str, Any]] = None  # {"name", "calibrated"}
    reference_s: float = 0.0
    numerics: Dict[str, Any] = field(default_factory=dict)
    ops_timed: int = 0
    ops: List[Dict[str, Any]] = field(default_factory=list)
    collectives: List[Dict[str, Any]] = field(default_factory=list)
    timeline: Optional[Dict[str, Any]] = None  # the last run's events (Client.trace)
    webhook: Optional[Dict[str, Any]] = None
    raw: _Raw = _raw()


FINAL_STATUSES = ("succeeded", "failed", "canceled")


@dataclass
class Benchmark:
    """A benchmark run: ``status`` queued, running, succeeded, failed or canceled.

    ``progress`` goes 0 -> 0.1 (plan read and partitioned) -> 1; ``results``
    is set once it succeeded, ``error`` once it failed.
    """

    id: int = 0
    plan_id: int = 0
    status: str = ""
    progress: float = 0.0
    spec: Dict[str, Any] = field(default_factory=dict)
    results: Optional[BenchmarkResults] = None
    error: Optional[str] = None
    webhook_url: Optional[str] = None
    created_at: int = 0
    updated_at: int = 0
    replayed: bool = field(default=False, metadata={"key": "-replayed"})
    raw: _Raw = _raw()

    @property
    def done(self) -> bool:
        """Whether the run has ended (succeeded, failed or canceled)."""
        return self.status in FINAL_STATUSES


# ---- tokens ------------------------------------------------------------------------------------


@dataclass
class Token:
    """An API token as listed: its id, the prefix of its secret, scope and label."""

    id: int = 0
    prefix: str = ""
    scope: str = ""
    label: str = ""
    created_at: int = 0
    raw: _Raw = _raw()


@dataclass
class NewToken:
    """A token just created: ``token`` is the secret, shown this once."""

    id: int = 0
    token: str = ""
    scope: str = ""
    label: str = ""
    raw: _Raw = _raw()
