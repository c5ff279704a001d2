"""The Shardplan HTTP client: one method per route of the /v1 API.

Standard library only (http.client, json). A :class:`Client` holds the server's
base URL and an optional bearer token; each method sends one request (a
few send more, and say so) and returns a typed result from
:mod:`shardplan.types`, or raises a :class:`~shardplan.errors.ShardplanError`
subclass carrying the server's error code, message and path.

    >>> from shardplan import Client
    >>> c = Client("http://127.0.0.1:8080")
    >>> plan = c.plan(open("examples/flax_mlp.mlir").read())
    >>> [t.sharding.spec_text() for t in plan.inputs]     # doctest: +SKIP
    ["P(None, 'model')", ...]
"""

from __future__ import annotations

import copy
import http.client
import json
import os
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from email.message import Message
from typing import (
    Any,
    Callable,
    Dict,
    Iterable,
    Iterator,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Type,
    TypeVar,
    Union,
)

from . import errors
from ._convert import from_json
from .types import (
    Benchmark,
    CollectivesReport,
    Comparison,
    Cost,
    Graph,
    Health,
    Migration,
    LintReport,
    MemoryTimeline,
    Mesh,
    NewToken,
    Page,
    Plan,
    PlanSummary,
    StoredDocument,
    SuggestReport,
    SweepResult,
    Token,
    WhatIfResult,
)

T = TypeVar("T")

#: What :meth:`Client.plan` accepts: an object with ``as_text()`` (a
#: ``jax.stages.Lowered``), MLIR text, a graph document (dict, or its JSON
#: text), bytes of either, a path to a file of either, or a stored :class:`Graph`.
Source = Any

#: A mesh: a stored mesh's name, ``{"data": 2, "model": 4}``, a mesh
#: document ``{"axes": [{"name", "size"}, ...]}`` (optionally with ``"name"``),
#: a :class:`~shardplan.types.Mesh`, or a ``jax.sharding.Mesh`` (anything
#: with ``axis_names`` and ``shape``).
MeshLike = Any

ProgressFn = Callable[[Benchmark], None]

_JSON = "application/json"


@dataclass
class Response:
    """A raw answer: status, headers and body bytes (see :meth:`Client.request`)."""

    status: int
    headers: Message
    body: bytes

    def json(self) -> Any:
        """The body decoded as JSON (None for an empty body); a body that is
        not JSON raises :class:`~shardplan.errors.ShardplanError`."""
        if not self.body:
            return None
        try:
            return json.loads(self.body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise errors.ShardplanError(
                f"the answer is not JSON ({e}): {self.body[:200]!r}", status=self.status,
                body=self.body,
            ) from None

    @property
    def text(self) -> str:
        """The body as text."""
        return self.body.decode("utf-8", "replace")


def _looks_json(text: str) -> bool:
    return text.lstrip()[:1] == "{"


def _mesh_doc(mesh: MeshLike) -> Union[str, Dict[str, Any]]:
    """A stored mesh's name (str) or a mesh document for the plan envelope."""
    if isinstance(mesh, str):
        return mesh
    if isinstance(mesh, Mesh):
        doc: Dict[str, Any] = {"axes": [{"name": a.name, "size": a.size} for a in mesh.axes]}
        if mesh.name:
            doc["name"] = mesh.name
        return doc
    if isinstance(mesh, Mapping):
        if "axes" in mesh:
            return dict(mesh)
        return {"axes": [{"name": str(k), "size": int(v)} for k, v in mesh.items()]}
    names = getattr(mesh, "axis_names", None)
    shape = getattr(mesh, "shape", None)
    if names is not None and isinstance(shape, Mapping):
        return {"axes": [{"name": str(n), "size": int(shape[n])} for n in names]}
    raise TypeError(
        "mesh must be a stored mesh's name, {'axis': size, ...}, a mesh document "
        "{'axes': [...]}, a shardplan.Mesh or a jax.sharding.Mesh; got "
        f"{type(mesh).__name__}"
    )


def _source(source: Source) -> Tuple[str, Any]:
    """("graph", dict) | ("mlir", str) | ("graph_id", int) for a plan's source."""
    if isinstance(source, Graph):
        return "graph_id", source.id
    as_text = getattr(source, "as_text", None)
    if callable(as_text):
        text = as_text()
        if not isinstance(text, str):
            raise TypeError(f"{type(source).__name__}.as_text() returned {type(text).__name__}, not str")
        return "mlir", text
    if isinstance(source, os.PathLike):
        with open(source, "rb") as f:
            source = f.read()
    if isinstance(source, (bytes, bytearray, memoryview)):
        source = bytes(source).decode("utf-8")
    if isinstance(source, str):
        if _looks_json(source):
            try:
                doc = json.loads(source)
            except ValueError as e:
                raise ValueError(f"the source looks like JSON but does not parse: {e}") from None
            return "graph", doc
        if "\n" not in source and len(source) < 4096 and os.path.isfile(source):
            raise ValueError(
                f"{source!r} is a file name, not MLIR text: pass pathlib.Path({source!r}) "
                "to plan the file"
            )
        return "mlir", source
    if isinstance(source, Mapping):
        return "graph", dict(source)
    raise TypeError(
        "plan() takes an object with as_text() (jax.stages.Lowered), MLIR text, a graph "
        f"document (dict or JSON text), bytes or a path; got {type(source).__name__}"
    )


def _id_of(x: Any) -> int:
    """The id of a result (anything with ``.id``) or an int."""
    i = getattr(x, "id", x)
    if isinstance(i, bool) or not isinstance(i, int):
        raise TypeError(f"expected an id (int) or an object with .id, got {type(x).__name__}")
    return i


class Client:
    """A client of one Shardplan server.

    ``url`` is the server's base URL (``http://127.0.0.1:8080``); ``token``
    an API token sent as ``Authorization: Bearer TOKEN`` (needed beyond
    loopback, or with ``--auth on``); ``timeout`` the seconds one request may
    take (planning a large model may take the server's ``--timeout``, 30 s
    by default). Methods raise :class:`~shardplan.errors.ShardplanError`.
    """

    def __init__(self, url: str, token: Optional[str] = None, *, timeout: float = 120.0) -> None:
        parts = urllib.parse.urlsplit(url or "")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"url must be an http:// or https:// base URL, got {url!r}")
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self._scheme = parts.scheme
        self._host = parts.hostname
        self._port = parts.port
        self._prefix = parts.path.rstrip("/")

    def __repr__(self) -> str:
        return f"Client({self.url!r}{', token=...' if self.token else ''})"

    # ---- transport -----------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Optional[Mapping[str, Any]] = None,
        body: Optional[Union[bytes, str]] = None,
        json_body: Any = None,
        content_type: Optional[str] = None,
        headers: Optional[Mapping[str, str]] = None,
        ok: Sequence[int] = (200, 201, 202, 204),
    ) -> Response:
        """Sends one request and returns the raw :class:`Response`.

        ``path`` starts with ``/``; ``query`` members that are None are left
        out, booleans are sent as ``true``/``false``. ``json_body`` is encoded
        as JSON. An answer whose status is not in ``ok`` raises the
        :class:`~shardplan.errors.ShardplanError` subclass of its error code;
        no answer at all raises :class:`~shardplan.errors.TransportError`.
        """
        url = self.url + path
        if query:
            q = []
            for k, v in query.items():
                if v is None:
                    continue
                if isinstance(v, bool):
                    v = "true" if v else "false"
                q.append((k, str(v)))
            if q:
                url += "?" + urllib.parse.urlencode(q, quote_via=urllib.parse.quote)
        data: Optional[bytes] = None
        hdrs: Dict[str, str] = {"Accept": _JSON, "User-Agent": "shardplan-python/0.1"}
        if json_body is not None:
            data = json.dumps(json_body, separators=(",", ":")).encode("utf-8")
            hdrs["Content-Type"] = content_type or _JSON
        elif body is not None:
            data = body.encode("utf-8") if isinstance(body, str) else bytes(body)
            hdrs["Content-Type"] = content_type or "application/octet-stream"
        if self.token:
            hdrs["Authorization"] = "Bearer " + self.token
        if headers:
            hdrs.update(headers)
        try:
            r = self._send(method, url, data, hdrs)
        except (OSError, http.client.HTTPException) as e:
            raise errors.TransportError(f"{method} {url}: {e}", method=method, url=url) from e
        if r.status not in ok:
            raise errors.error_from_response(
                r.status,
                r.body,
                method=method,
                url=url,
                retry_after=r.headers.get("Retry-After") if r.headers else None,
            )
        return r

    def _connection(self) -> Tuple[http.client.HTTPConnection, bool]:
        """A new connection to the server (or its proxy, from the environment) and whether
        requests through it name the absolute URL (a plain HTTP proxy)."""
        proxy = None
        if not urllib.request.proxy_bypass(self._host):
            proxy = urllib.request.getproxies().get(self._scheme)
        if self._scheme == "https":
            if proxy:
                pp = urllib.parse.urlsplit(proxy)
                conn = http.client.HTTPSConnection(pp.hostname or "", pp.port or 8080, timeout=self.timeout)
                conn.set_tunnel(self._host, self._port or 443)
                return conn, False
            return http.client.HTTPSConnection(self._host, self._port, timeout=self.timeout), False
        if proxy:
            pp = urllib.parse.urlsplit(proxy)
            return http.client.HTTPConnection(pp.hostname or "", pp.port or 8080, timeout=self.timeout), True
        return http.client.HTTPConnection(self._host, self._port, timeout=self.timeout), False

    def _send(self, method: str, url: str, data: Optional[bytes], hdrs: Dict[str, str]) -> Response:
        """One exchange on a fresh connection. When the server answers before it has read
        the whole body (413 at once, for one) and closes, the send fails; the answer it
        sent is still read and returned."""
        conn, absolute = self._connection()
        target = url if absolute else self._prefix + url[len(self.url):]
        try:
            try:
                conn.request(method, target, body=data, headers=hdrs)
            except (BrokenPipeError, ConnectionResetError) as send_err:
                try:
                    resp = conn.getresponse()
                except (OSError, http.client.HTTPException):
                    raise send_err from None
            else:
                resp = conn.getresponse()
            return Response(resp.status, resp.headers, resp.read())
        finally:
            conn.close()

    def _get(self, cls: Type[T], path: str, **query: Any) -> T:
        return from_json(cls, self.request("GET", path, query=query).json())

    def _page(self, cls: Type[T], path: str, query: Dict[str, Any]) -> Page[T]:
        doc = self.request("GET", path, query=query).json()
        return Page([from_json(cls, x) for x in doc.get("items", [])], int(doc.get("next_after", 0)))

    def _iterate(self, fetch: Callable[..., Page[T]], **query: Any) -> Iterator[T]:
        after = query.pop("after", 0) or 0
        while True:
            page = fetch(after=after, **query)
            yield from page.items
            if not page.next_after:
                return
            after = page.next_after

    @staticmethod
    def _q(name: str) -> str:
        return urllib.parse.quote(str(name), safe="")

    # ---- health --------------------------------------------------------------------------------

    def health(self) -> Health:
        """``GET /healthz``: the process answers (``status`` "ok")."""
        return self._get(Health, "/healthz")

    def ready(self) -> Health:
        """``GET /readyz``: the store is open, writable and sound (``status`` "ready").

        A server that is not ready raises :class:`~shardplan.errors.Unavailable`.
        """
        return self._get(Health, "/readyz")

    def metrics(self) -> str:
        """``GET /metrics``: Prometheus text (scope ``read`` when auth is on)."""
        return self.request("GET", "/metrics").text

    def openapi(self) -> Dict[str, Any]:
        """``GET /v1/openapi.json``: the API's OpenAPI 3 document."""
        return self.request("GET", "/v1/openapi.json").json()

    # ---- graphs --------------------------------------------------------------------------------

    def submit_graph(self, source: Source, *, name: Optional[str] = None) -> Graph:
        """``POST /v1/graphs``: stores a graph document or MLIR text (deduplicated by content).

        ``source`` is what :meth:`plan` takes (except a stored graph). The
        answer is the graph's metadata; ``raw`` tells 201 from 200 nowhere,
        so compare ids to see whether it was stored before.
        """
        kind, value = _source(source)
        if kind == "graph_id":
            raise TypeError("submit_graph() takes a document or MLIR, not a stored graph")
        if kind == "graph":
            r = self.request("POST", "/v1/graphs", query={"name": name}, json_body=value)
        else:
            r = self.request(
                "POST", "/v1/graphs", query={"name": name}, body=value, content_type="text/plain"
            )
        g = from_json(Graph, r.json())
        g.created = r.status == 201
        return g

    def list_graphs(
        self,
        *,
        limit: Optional[int] = None,
        after: Optional[int] = None,
        name: Optional[str] = None,
        format: Optional[str] = None,
        created_after: Optional[int] = None,
        created_before: Optional[int] = None,
    ) -> Page[Graph]:
        """``GET /v1/graphs``: one page of stored graphs, newest filters as the server has them."""
        return self._page(
            Graph,
            "/v1/graphs",
            dict(limit=limit, after=after, name=name, format=format,
                 created_after=created_after, created_before=created_before),
        )

    def iter_graphs(self, **filters: Any) -> Iterator[Graph]:
        """Every stored graph matching the filters of :meth:`list_graphs`, page by page."""
        return self._iterate(self.list_graphs, **filters)

    def get_graph(self, graph_id: Union[int, Graph]) -> Graph:
        """``GET /v1/graphs/{id}``: the metadata with the document (``graph``) or text (``mlir``)."""
        return self._get(Graph, f"/v1/graphs/{_id_of(graph_id)}")

    def get_graph_raw(self, graph_id: Union[int, Graph]) -> Union[Dict[str, Any], str]:
        """``GET /v1/graphs/{id}?raw=1``: the document (dict) or MLIR text (str) as stored."""
        r = self.request("GET", f"/v1/graphs/{_id_of(graph_id)}", query={"raw": 1})
        ctype = r.headers.get("Content-Type", "") if r.headers else ""
        return r.json() if ctype.startswith(_JSON) else r.text

    def delete_graph(self, graph_id: Union[int, Graph]) -> None:
        """``DELETE /v1/graphs/{id}``: the graph and its plans."""
        self.request("DELETE", f"/v1/graphs/{_id_of(graph_id)}")

    # ---- named documents: meshes, rules, profiles ------------------------------------------------

    def _put_doc(self, coll: str, name: str, body: Any, create_only: bool) -> StoredDocument:
        hdrs = {"If-None-Match": "*"} if create_only else None
        r = self.request("PUT", f"/v1/{coll}/{self._q(name)}", json_body=body, headers=hdrs)
        d = self._doc(coll, r.json())
        d.created = r.status == 201
        return d

    @staticmethod
    def _doc(coll: str, doc: Dict[str, Any]) -> StoredDocument:
        d = from_json(StoredDocument, doc)
        d.body = doc.get({"meshes": "mesh", "rules": "rule", "profiles": "profile"}[coll])
        return d

    def _get_doc(self, coll: str, name: str) -> StoredDocument:
        return self._doc(coll, self.request("GET", f"/v1/{coll}/{self._q(name)}").json())

    def _list_docs(self, coll: str, limit: Optional[int], after: Optional[int]) -> Page[StoredDocument]:
        return self._page(StoredDocument, f"/v1/{coll}", {"limit": limit, "after": after})

    def put_mesh(self, name: str, mesh: MeshLike, *, create_only: bool = False) -> StoredDocument:
        """``PUT /v1/meshes/{name}``: stores a mesh (created or replaced).

        ``mesh`` is ``{"data": 2, "model": 4}``, a mesh document
        ``{"axes": [...]}``, a :class:`~shardplan.types.Mesh` or a
        ``jax.sharding.Mesh``. ``create_only`` sends ``If-None-Match: *``: a
        different stored mesh of that name is then a
        :class:`~shardplan.errors.Conflict`.
        """
        doc = _mesh_doc(mesh)
        if isinstance(doc, str):
            raise TypeError("put_mesh() takes a mesh, not a name")
        doc.pop("name", None)
        return self._put_doc("meshes", name, doc, create_only)

    def get_mesh(self, name: str) -> StoredDocument:
        """``GET /v1/meshes/{name}``; ``body`` is the mesh document."""
        return self._get_doc("meshes", name)

    def list_meshes(self, *, limit: Optional[int] = None, after: Optional[int] = None) -> Page[StoredDocument]:
        """``GET /v1/meshes``."""
        return self._list_docs("meshes", limit, after)

    def delete_mesh(self, name: str) -> None:
        """``DELETE /v1/meshes/{name}``."""
        self.request("DELETE", f"/v1/meshes/{self._q(name)}")

    def put_rule(self, name: str, rule: Any, *, create_only: bool = False) -> StoredDocument:
        """``PUT /v1/rules/{name}``: a custom rule for call target ``name``.

        ``rule`` is what a graph document's ``custom_rules`` holds for one
        target: an einsum-like string (``"i j, j k -> i k"``) or an object.
        Stored rules apply to every plan whose input calls that target and
        does not define it itself.
        """
        return self._put_doc("rules", name, rule, create_only)

    def get_rule(self, name: str) -> StoredDocument:
        """``GET /v1/rules/{name}``; ``body`` is the rule."""
        return self._get_doc("rules", name)

    def list_rules(self, *, limit: Optional[int] = None, after: Optional[int] = None) -> Page[StoredDocument]:
        """``GET /v1/rules``."""
        return self._list_docs("rules", limit, after)

    def delete_rule(self, name: str) -> None:
        """``DELETE /v1/rules/{name}``."""
        self.request("DELETE", f"/v1/rules/{self._q(name)}")

    def put_profile(self, name: str, profile: Mapping[str, Any], *, create_only: bool = False) -> StoredDocument:
        """``PUT /v1/profiles/{name}``: a device profile (profiles/*.json, docs/cost-model.md)."""
        return self._put_doc("profiles", name, dict(profile), create_only)

    def get_profile(self, name: str) -> StoredDocument:
        """``GET /v1/profiles/{name}``; ``body`` is the profile."""
        return self._get_doc("profiles", name)

    def list_profiles(self, *, limit: Optional[int] = None, after: Optional[int] = None) -> Page[StoredDocument]:
        """``GET /v1/profiles`` (stored ones; the built-in profiles are usable by name too)."""
        return self._list_docs("profiles", limit, after)

    def delete_profile(self, name: str) -> None:
        """``DELETE /v1/profiles/{name}``."""
        self.request("DELETE", f"/v1/profiles/{self._q(name)}")

    # ---- plans ---------------------------------------------------------------------------------

    def _post_plan(self, envelope: Dict[str, Any]) -> Plan:
        r = self.request("POST", "/v1/plans", json_body=envelope)
        p = from_json(Plan, r.json())
        p.created = r.status == 201
        return p

    def plan(
        self,
        source: Source,
        *,
        mesh: Optional[MeshLike] = None,
        rules: Optional[Mapping[str, Any]] = None,
        name: Optional[str] = None,
        pass_: Optional[str] = None,
    ) -> Plan:
        """``POST /v1/plans``: plans a model and returns the stored plan.

        ``source`` is anything with ``as_text()`` returning MLIR (a
        ``jax.stages.Lowered`` from ``jax.jit(f).lower(x)``; jax is never
        imported here), MLIR text, a graph document (dict or JSON text),
        bytes or a path of either, or a stored :class:`~shardplan.types.Graph`.

        ``mesh`` replaces the graph document's mesh of the same name, else its
        only mesh (graph documents only: MLIR declares its ``sdy.mesh``).
        ``rules`` maps call targets to custom rules: for a graph document they
        are merged into its ``custom_rules`` (over same-named ones); for MLIR
        they are stored first with :meth:`put_rule` (so they then apply to
        later plans too), since MLIR carries no rules of its own. ``name``
        names the plan (default: the document's name or ``module @NAME``);
        ``pass_`` is the pipeline (default ``sdy-propagation-pipeline``).

        A plan of the same input, pass and rules answers the stored plan:
        ``Plan.created`` is False then.
        """
        kind, value = _source(source)
        env: Dict[str, Any] = {}
        if kind == "graph" and rules:
            value = copy.deepcopy(value)
            own = value.get("custom_rules")
            merged = dict(own) if isinstance(own, Mapping) else {}
            merged.update(rules)
            value["custom_rules"] = merged
        elif rules:
            for target, rule in rules.items():
                self.put_rule(target, rule)
        env[kind] = value
        if mesh is not None:
            env["mesh"] = _mesh_doc(mesh)
        if pass_ is not None:
            env["options"] = {"pass": pass_}
        if name is not None:
            env["name"] = name
        return self._post_plan(env)

    def plan_graph(
        self,
        graph: Union[int, Graph],
        *,
        mesh: Optional[MeshLike] = None,
        name: Optional[str] = None,
        pass_: Optional[str] = None,
    ) -> Plan:
        """``POST /v1/plans`` with ``{"graph_id": ...}``: plans a stored graph."""
        env: Dict[str, Any] = {"graph_id": _id_of(graph)}
        if mesh is not None:
            env["mesh"] = _mesh_doc(mesh)
        if pass_ is not None:
            env["options"] = {"pass": pass_}
        if name is not None:
            env["name"] = name
        return self._post_plan(env)

    def plan_example(
        self,
        model: str = "mlp",
        *,
        name: Optional[str] = None,
        pass_: Optional[str] = None,
        **params: Any,
    ) -> Plan:
        """``POST /v1/plans`` with ``{"example": ...}``: the server builds a model template and plans it.

        ``params`` are the template's members (docs/graph-format.md,
        "Templates"): ``layers``, ``d_model``, ``heads``, ``seq``, ``batch``,
        ``train``, ``strategy`` ("dp", "fsdp", "tp", "dp+tp") and ``mesh``
        (``{"data": 2, "model": 4}``).
        """
        env: Dict[str, Any] = {"example": dict(params, model=model)}
        if pass_ is not None:
            env["options"] = {"pass": pass_}
        if name is not None:
            env["name"] = name
        return self._post_plan(env)

    def get_plan(self, plan_id: Union[int, Plan], *, if_none_match: Optional[str] = None) -> Optional[Plan]:
        """``GET /v1/plans/{id}``: the stored plan, with its ``etag``.

        With ``if_none_match`` (an ``etag`` from before) the server answers
        304 when the plan is that one, and this returns None.
        """
        hdrs = {"If-None-Match": if_none_match} if if_none_match else None
        r = self.request("GET", f"/v1/plans/{_id_of(plan_id)}", headers=hdrs, ok=(200, 304))
        if r.status == 304:
            return None
        p = from_json(Plan, r.json())
        p.etag = r.headers.get("ETag") if r.headers else None
        return p

    def get_plan_mlir(self, plan_id: Union[int, Plan]) -> str:
        """``GET /v1/plans/{id}`` with ``Accept: application/mlir``: the propagated module."""
        r = self.request(
            "GET", f"/v1/plans/{_id_of(plan_id)}", headers={"Accept": "application/mlir"}
        )
        return r.text

    def list_plans(
        self,
        *,
        limit: Optional[int] = None,
        after: Optional[int] = None,
        graph_id: Optional[int] = None,
        mesh_id: Optional[int] = None,
        created_after: Optional[int] = None,
        created_before: Optional[int] = None,
    ) -> Page[PlanSummary]:
        """``GET /v1/plans``: one page of plan summaries."""
        return self._page(
            PlanSummary,
            "/v1/plans",
            dict(limit=limit, after=after, graph_id=graph_id, mesh_id=mesh_id,
                 created_after=created_after, created_before=created_before),
        )

    def iter_plans(self, **filters: Any) -> Iterator[PlanSummary]:
        """Every plan matching the filters of :meth:`list_plans`, page by page."""
        return self._iterate(self.list_plans, **filters)

    def delete_plan(self, plan_id: Union[int, Plan]) -> None:
        """``DELETE /v1/plans/{id}``."""
        self.request("DELETE", f"/v1/plans/{_id_of(plan_id)}")

    # ---- the advisor ---------------------------------------------------------------------------

    def cost(self, plan_id: Union[int, Plan], *, profile: Optional[str] = None) -> Cost:
        """``GET /v1/plans/{id}/cost``: per-device memory, FLOPs, communication and step time of
        the partitioned plan on ``profile`` (a stored or built-in profile; default cpu-local)."""
        return self._get(Cost, f"/v1/plans/{_id_of(plan_id)}/cost", profile=profile)

    def memory(
        self,
        plan_id: Union[int, Plan],
        *,
        profile: Optional[str] = None,
        points: Optional[int] = None,
    ) -> MemoryTimeline:
        """``GET /v1/plans/{id}/memory``: per-device live bytes after each op of the plan as it
        runs (at most ``points`` samples), the peak with its op and source location, and the
        largest buffers live there, on ``profile`` (default cpu-local)."""
        return self._get(
            MemoryTimeline, f"/v1/plans/{_id_of(plan_id)}/memory", profile=profile, points=points
        )

    def lint(
        self,
        plan_id: Union[int, Plan],
        *,
        profile: Optional[str] = None,
        mesh: Optional[str] = None,
        min_bytes: Optional[int] = None,
    ) -> LintReport:
        """``GET /v1/plans/{id}/lint``: findings with fixes (docs/advisor.md)."""
        return self._get(
            LintReport, f"/v1/plans/{_id_of(plan_id)}/lint",
            profile=profile, mesh=mesh, min_bytes=min_bytes,
        )

    def collectives(self, plan_id: Union[int, Plan], *, profile: Optional[str] = None) -> CollectivesReport:
        """``GET /v1/plans/{id}/collectives``: every inserted collective and its cause."""
        return self._get(CollectivesReport, f"/v1/plans/{_id_of(plan_id)}/collectives", profile=profile)

    def suggest(
        self,
        plan_id: Union[int, Plan],
        *,
        objective: Optional[str] = None,
        k: Optional[int] = None,
        profile: Optional[str] = None,
        max_candidates: Optional[int] = None,
    ) -> SuggestReport:
        """``GET /v1/plans/{id}/suggest``: constraints that cut predicted ``objective``
        ("time" or "memory"), at most ``k`` (<= 100) of ``max_candidates`` (<= 256) tried."""
        return self._get(
            SuggestReport, f"/v1/plans/{_id_of(plan_id)}/suggest",
            objective=objective, k=k, profile=profile, max_candidates=max_candidates,
        )

    def whatif(
        self,
        plan_id: Union[int, Plan],
        edits: Iterable[Mapping[str, Any]],
        *,
        save: bool = False,
        profile: Optional[str] = None,
    ) -> WhatIfResult:
        """``POST /v1/plans/{id}/whatif``: the plan with ``edits`` applied, re-propagated.

        An edit is ``{"kind": "constrain", "value": {"op": "/ops/0"},
        "sharding": "<@mesh, [{}, {}]>"}`` and the like (docs/advisor.md,
        "What-if"); a bad edit raises :class:`~shardplan.errors.BadRequest`
        at ``/edits/N/...``. ``save`` stores the edited module as a new plan
        (``plan_id`` of the result).
        """
        body: Dict[str, Any] = {"edits": [dict(e) for e in edits]}
        if save:
            body["save"] = True
        if profile is not None:
            body["profile"] = profile
        return from_json(
            WhatIfResult,
            self.request("POST", f"/v1/plans/{_id_of(plan_id)}/whatif", json_body=body).json(),
        )

    def compare(self, plans: Sequence[Union[int, Plan]], *, profile: Optional[str] = None) -> Comparison:
        """``GET /v1/compare``: 2 to 4 stored plans side by side (cost and differing shardings)."""
        ids = ",".join(str(_id_of(p)) for p in plans)
        return self._get(Comparison, "/v1/compare", plans=ids, profile=profile)

    # ---- migration reports -----------------------------------------------------------------------

    def migrate(
        self, mlir: str, *, name: Optional[str] = None, profile: Optional[str] = None
    ) -> Migration:
        """``POST /v1/migrations``: the GSPMD -> Shardy migration report of a module, stored.

        ``mlir`` is the module as GSPMD left it (``mhlo.sharding`` on its
        ops); ``profile`` a stored or built-in device profile (default
        cpu-local). The same request twice answers the stored report.
        """
        r = self.request(
            "POST", "/v1/migrations", query={"name": name, "profile": profile}, body=mlir,
            content_type="text/plain",
        )
        m = from_json(Migration, r.json())
        m.created = r.status == 201
        return m

    def list_migrations(self, *, limit: Optional[int] = None, after: Optional[int] = None) -> Page[Migration]:
        """``GET /v1/migrations``: one page of stored migration reports (metadata only)."""
        return self._page(Migration, "/v1/migrations", dict(limit=limit, after=after))

    def get_migration(self, migration_id: Union[int, Migration]) -> Migration:
        """``GET /v1/migrations/{id}``: a stored report with its module."""
        return self._get(Migration, f"/v1/migrations/{_id_of(migration_id)}")

    def sweep_plan(
        self,
        plan_id: Union[int, Plan],
        *,
        devices: Optional[int] = None,
        mesh: Optional[str] = None,
        profile: Optional[str] = None,
        logical_rules: Optional[bool] = None,
    ) -> SweepResult:
        """``GET /v1/plans/{id}/sweep``: the plan's own model over every mesh of
        ``devices`` (default: its mesh's own count), the mesh's axis names and order
        kept, each variant planned with the plan's pass and rules, ranked.
        ``logical_rules=True`` (a Flax graph) varies its ``logical_axis_rules``
        instead: each logical axis name on each mesh axis or none, the mesh kept
        (rows carry ``rules`` and ``own``)."""
        return self._get(
            SweepResult, f"/v1/plans/{_id_of(plan_id)}/sweep",
            devices=devices, mesh=mesh, profile=profile, logical_rules=logical_rules,
        )

    def sweep(
        self,
        *,
        devices: Optional[int] = None,
        layers: Optional[int] = None,
        d_model: Optional[int] = None,
        heads: Optional[int] = None,
        seq: Optional[int] = None,
        batch: Optional[int] = None,
        strategies: Optional[Union[str, Sequence[str]]] = None,
        train: Optional[bool] = None,
        profile: Optional[str] = None,
    ) -> SweepResult:
        """``GET /v1/sweep``: a transformer template over meshes x ``strategies``
        ("dp", "fsdp", "tp", "dp+tp"), ranked, with the Pareto front."""
        if strategies is not None and not isinstance(strategies, str):
            strategies = ",".join(strategies)
        return self._get(
            SweepResult, "/v1/sweep",
            devices=devices, layers=layers, d_model=d_model, heads=heads, seq=seq, batch=batch,
            strategies=strategies, train=train, profile=profile,
        )

    # ---- benchmarks ----------------------------------------------------------------------------

    def benchmark(
        self,
        plan: Union[int, Plan],
        *,
        devices: Optional[int] = None,
        warmup: Optional[int] = None,
        iters: Optional[int] = None,
        seed: Optional[int] = None,
        affinity: Optional[bool] = None,
        webhook_url: Optional[str] = None,
        idempotency_key: Optional[str] = None,
        params: Optional[Mapping[str, Any]] = None,
        wait: bool = False,
        progress: Optional[ProgressFn] = None,
        poll_interval: float = 0.25,
        wait_timeout: Optional[float] = None,
    ) -> Benchmark:
        """``POST /v1/benchmarks``: queues a run of a stored plan on the server's executor.

        The members are those of docs/api.md ("Benchmark runs"); None leaves
        the server's default; ``params`` are further members of the body, sent
        as they are (the server answers an unknown one with a
        :class:`~shardplan.errors.BadRequest` at its path). ``idempotency_key`` makes a retry answer the
        run the first request queued (``Benchmark.replayed``). With ``wait``
        this polls the run (:meth:`wait_benchmark`) until it has ended,
        calling ``progress(run)`` after each poll, and returns the final run;
        a failed or canceled run raises :class:`~shardplan.errors.BenchmarkFailed`.
        """
        body: Dict[str, Any] = {"plan_id": _id_of(plan)}
        body.update(params or {})
        for k, v in (("devices", devices), ("warmup", warmup), ("iters", iters), ("seed", seed),
                     ("affinity", affinity), ("webhook_url", webhook_url)):
            if v is not None:
                body[k] = v
        hdrs = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        r = self.request("POST", "/v1/benchmarks", json_body=body, headers=hdrs)
        run = from_json(Benchmark, r.json())
        run.replayed = bool(r.headers and r.headers.get("Idempotent-Replayed") == "true")
        if not wait:
            return run
        if progress is not None:
            progress(run)
        if run.done:
            return self._final(run)
        return self.wait_benchmark(run, progress=progress, poll_interval=poll_interval, timeout=wait_timeout)

    @staticmethod
    def _final(run: Benchmark) -> Benchmark:
        if run.status != "succeeded":
            e = errors.BenchmarkFailed(
                f"benchmark run {run.id} {run.status}" + (f": {run.error}" if run.error else ""),
                code=run.status,
            )
            e.run = run
            raise e
        return run

    def wait_benchmark(
        self,
        run: Union[int, Benchmark],
        *,
        progress: Optional[ProgressFn] = None,
        poll_interval: float = 0.25,
        timeout: Optional[float] = None,
    ) -> Benchmark:
        """Polls ``GET /v1/benchmarks/{id}`` until the run has ended; returns it.

        ``progress(run)`` is called with each polled run. A failed or
        canceled run raises :class:`~shardplan.errors.BenchmarkFailed` (its
        ``run`` attribute is the final run); past ``timeout`` seconds,
        :class:`~shardplan.errors.WaitTimeout`.
        """
        rid = _id_of(run)
        start = time.monotonic()
        while True:
            cur = self.get_benchmark(rid)
            if progress is not None:
                progress(cur)
            if cur.done:
                return self._final(cur)
            if timeout is not None and time.monotonic() - start > timeout:
                e = errors.WaitTimeout(
                    f"benchmark run {rid} still {cur.status} after {timeout:g} s"
                )
                e.run = cur
                raise e
            time.sleep(poll_interval)

    def get_benchmark(self, run_id: Union[int, Benchmark]) -> Benchmark:
        """``GET /v1/benchmarks/{id}``: status, progress, results, error."""
        return self._get(Benchmark, f"/v1/benchmarks/{_id_of(run_id)}")

    def list_benchmarks(
        self,
        *,
        status: Optional[str] = None,
        plan_id: Optional[int] = None,
        limit: Optional[int] = None,
        after: Optional[int] = None,
    ) -> Page[Benchmark]:
        """``GET /v1/benchmarks``: runs (without results), by ``status`` and ``plan_id``."""
        return self._page(
            Benchmark, "/v1/benchmarks",
            dict(status=status, plan_id=plan_id, limit=limit, after=after),
        )

    def iter_benchmarks(self, **filters: Any) -> Iterator[Benchmark]:
        """Every run matching the filters of :meth:`list_benchmarks`, page by page."""
        return self._iterate(self.list_benchmarks, **filters)

    def cancel_benchmark(self, run_id: Union[int, Benchmark]) -> Benchmark:
        """``POST /v1/benchmarks/{id}/cancel``: a queued or running run becomes canceled.

        A run that has ended raises :class:`~shardplan.errors.Conflict` at ``/status``.
        """
        return from_json(
            Benchmark, self.request("POST", f"/v1/benchmarks/{_id_of(run_id)}/cancel").json()
        )

    def trace(self, run_id: Union[int, Benchmark]) -> Dict[str, Any]:
        """``GET /v1/benchmarks/{id}/trace``: the run's last timed run in the Chrome
        trace event format, a dict with ``traceEvents`` (one ``"X"`` event per op per
        device, ``tid`` the device, collectives with ``cat`` ``"collective"``).
        ``json.dump`` it to a file to open it in Perfetto or ``chrome://tracing``.
        A run without a timeline (not succeeded yet) raises
        :class:`~shardplan.errors.NotFound`.
        """
        doc: Dict[str, Any] = self.request("GET", f"/v1/benchmarks/{_id_of(run_id)}/trace").json()
        return doc

    def delete_benchmark(self, run_id: Union[int, Benchmark]) -> None:
        """``DELETE /v1/benchmarks/{id}`` (a running run is canceled first)."""
        self.request("DELETE", f"/v1/benchmarks/{_id_of(run_id)}")

    # /v1/runs: the same collection under its first name

    def create_run(
        self,
        plan: Union[int, Plan],
        *,
        spec: Optional[Mapping[str, Any]] = None,
        webhook_url: Optional[str] = None,
    ) -> Benchmark:
        """``POST /v1/runs`` (the first form of :meth:`benchmark`): ``{"plan_id", "spec", "webhook_url"}``.

        The server reads ``devices``, ``warmup``, ``iters``, ``seed`` and
        ``affinity`` from ``spec`` and ignores its other members; prefer
        :meth:`benchmark`, which rejects unknown ones.
        """
        body: Dict[str, Any] = {"plan_id": _id_of(plan)}
        if spec is not None:
            body["spec"] = dict(spec)
        if webhook_url is not None:
            body["webhook_url"] = webhook_url
        return from_json(Benchmark, self.request("POST", "/v1/runs", json_body=body).json())

    def get_run(self, run_id: Union[int, Benchmark]) -> Benchmark:
        """``GET /v1/runs/{id}``."""
        return self._get(Benchmark, f"/v1/runs/{_id_of(run_id)}")

    def list_runs(
        self,
        *,
        status: Optional[str] = None,
        plan_id: Optional[int] = None,
        limit: Optional[int] = None,
        after: Optional[int] = None,
    ) -> Page[Benchmark]:
        """``GET /v1/runs``."""
        return self._page(
            Benchmark, "/v1/runs", dict(status=status, plan_id=plan_id, limit=limit, after=after)
        )

    def delete_run(self, run_id: Union[int, Benchmark]) -> None:
        """``DELETE /v1/runs/{id}``."""
        self.request("DELETE", f"/v1/runs/{_id_of(run_id)}")

    # ---- tokens (scope admin) ------------------------------------------------------------------

    def create_token(self, scope: str = "read", *, label: Optional[str] = None) -> NewToken:
        """``POST /v1/tokens``: a token of ``scope`` ("read", "write" or "admin"); the secret is
        in ``token``, shown this once."""
        body: Dict[str, Any] = {"scope": scope}
        if label is not None:
            body["label"] = label
        return from_json(NewToken, self.request("POST", "/v1/tokens", json_body=body).json())

    def list_tokens(self, *, limit: Optional[int] = None, after: Optional[int] = None) -> Page[Token]:
        """``GET /v1/tokens``: ids, prefixes, scopes and labels (never the secrets)."""
        return self._page(Token, "/v1/tokens", {"limit": limit, "after": after})

    def delete_token(self, token_id: Union[int, Token, NewToken]) -> None:
        """``DELETE /v1/tokens/{id}``: revokes the token."""
        self.request("DELETE", f"/v1/tokens/{_id_of(token_id)}")


__all__ = ["Client", "Response", "Source", "MeshLike", "ProgressFn"]
