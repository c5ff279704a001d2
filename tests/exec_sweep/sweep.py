#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The sharded-variant sweep of issue 19: real programs, sharded many ways,
run through `shardplan run` against its one-device reference.

Sources (read in place, never copied):
  interp  StableHLO's interpreter tests (STABLEHLO_TESTS/*.mlir): every
          function that builds its inputs from constants and checks them.
          Its checks are dropped and the checked values returned, so the
          executor runs it; the variants shard its rank >= 1 constants by
          wrapping them in `sdy.sharding_constraint` (the values stay the
          test's), or (float constants) make them sharded arguments fed with
          the seeded inputs; and constrain the results of its one-line ops
          (a reshard between two ops).
  own     our examples (examples/*.mlir) and tests/lit/run_*.mlir parts.
  shardy  Shardy's executable tests (SHARDY_TESTS/*executable*.mlir): each
          function of the `//--- part1.mlir` part, run as @main.
  For programs with arguments (own, shardy) the variants re-shard one
  argument at a time on each dimension and mesh axis (not in programs that
  hold explicit sdy collectives other than reshards: those were written
  for the given shardings), and resize the meshes' axes (to 1, 2 and 4,
  which exercises non-dividing shards).

Meshes for the constants: ["x"=2], ["x"=4] and ["x"=2, "y"=2] (dims on x,
on y, on (x, y), and x and y on two dims); every dimension choice that
divides and, for x=2 and x=4, the ones that do not (padding).

A program whose unsharded form the executor refuses on one device is not
a variant: it is counted apart (by message), as is a source that cannot be
turned into a runnable program. Each variant is classified:
  MATCH     numerics match
  MISMATCH  a wrong answer (a bug); also the run's "replicas disagree"
            error (devices holding one replicated value differ)
  REFUSED   a clear error (counted by message)
  CRASH     a signal, a sanitizer report, an unparseable answer (a bug)
  TIMEOUT   no answer within --timeout seconds (a bug)
Generation is deterministic (sorted files, fixed order, fixed seed).

Usage: sweep.py SHARDPLAN [--stablehlo DIR] [--shardy DIR] [--root DIR]
                [--quick] [--jobs N] [--timeout S] [--list] [--only SUBSTR]
                [--keep DIR] [--known FILE] [-v]
  --quick   a bounded subset (every program's first variants, capped) for
            `make test`; fails (exit 1) on a MISMATCH, CRASH or TIMEOUT
            not listed in --known (default tests/exec_sweep/known.txt)
  --list    print the variant ids and exit
  --keep    write every variant's module to DIR/<id>.mlir
Exit: 0, or 1 when a variant is a MISMATCH, CRASH or TIMEOUT that --known
does not list (both modes), 2 on usage errors.
"""

import argparse
import collections
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))

MESHES = {
    "x2": '["x"=2]',
    "x4": '["x"=4]',
    "x2y2": '["x"=2, "y"=2]',
}

# --------------------------------------------------------------------------
# Text helpers


def parse_tensor(ty):
    """tensor<4x2xf32> -> ([4, 2], "f32"); None for anything else
    (dynamic dims, tuples, tokens)."""
    m = re.fullmatch(r"\s*tensor<(.*)>\s*", ty)
    if not m:
        return None
    body = m.group(1)
    parts = []
    depth = 0
    cur = ""
    for ch in body:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        if ch == "x" and depth == 0 and re.fullmatch(r"\d+", cur):
            parts.append(int(cur))
            cur = ""
            continue
        cur += ch
    if "?" in body.split(",")[0] and not re.search(r"[a-z]", cur):
        return None
    if re.fullmatch(r"\d+", cur) or "?" in cur:
        return None
    return parts, cur


def bracket_depth(text):
    d = 0
    in_str = False
    prev = ""
    for ch in text:
        if in_str:
            if ch == '"' and prev != "\\":
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "([{":
            d += 1
        elif ch in ")]}":
            d -= 1
        prev = ch
    return d


def statements(lines):
    """Groups lines into statements: a statement continues while its
    (, [ and { are open. Yields (first line index, last index + 1)."""
    i = 0
    n = len(lines)
    while i < n:
        j = i
        d = bracket_depth(lines[i])
        while d > 0 and j + 1 < n:
            j += 1
            d += bracket_depth(lines[j])
        yield i, j + 1
        i = j + 1


def find_funcs(text):
    """Every `func.func` of text: (name, start, sig_end, body_start,
    body_end) as offsets; body_start is past the opening brace and body_end
    at the closing one."""
    out = []
    for m in re.finditer(r"^\s*func\.func\s+(?:(?:public|private)\s+)?@([\w.$-]+)", text, re.M):
        # the signature's parentheses, then the body's brace
        j = match_close(text, text.index("(", m.end()), "(", ")")
        if j < 0:
            return out
        # the body brace: the first { outside the results' parentheses,
        # skipping an attribute dict `attributes {...}`
        k = j + 1
        d = 0
        b = -1
        while k < len(text):
            ch = text[k]
            if ch == "(":
                d += 1
            elif ch == ")":
                d -= 1
            elif ch == "{" and d == 0:
                if re.search(r"attributes\s*$", text[j + 1 : k]):
                    k = match_brace(text, k)
                    if k < 0:
                        return out
                else:
                    b = k
                    break
            k += 1
        if b < 0:
            return out
        e = match_brace(text, b)
        if e < 0:
            return out
        out.append((m.group(1), m.start(), j + 1, b + 1, e))
    return out


def match_close(text, b, opening, closing):
    """The index of the bracket closing the one at b (strings skipped), or -1."""
    d = 0
    in_str = False
    for j in range(b, len(text)):
        ch = text[j]
        if in_str:
            if ch == '"' and text[j - 1] != "\\":
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch == opening:
            d += 1
        elif ch == closing:
            d -= 1
            if d == 0:
                return j
    return -1


def match_brace(text, b):
    return match_close(text, b, "{", "}")


def top_type(stmt):
    """The type after a statement's last top-level ' : '."""
    k = stmt.rfind(" : ")
    if k < 0:
        return None
    return stmt[k + 3 :].strip()


def spec(rank, assign):
    """The dims list of a sharding: assign maps dim -> list of axes."""
    dims = []
    for d in range(rank):
        axes = assign.get(d, [])
        dims.append("{" + ", ".join('"%s"' % a for a in axes) + "}")
    return "[" + ", ".join(dims) + "]"


def sharding_choices(shape, meshes=("x2", "x4", "x2y2")):
    """(mesh key, assign, divides) choices for a value of this shape."""
    out = []
    rank = len(shape)
    for mk in meshes:
        if mk in ("x2", "x4"):
            size = 2 if mk == "x2" else 4
            for d in range(rank):
                if shape[d] >= 2:
                    out.append((mk, {d: ["x"]}, shape[d] % size == 0))
        else:
            for d in range(rank):
                if shape[d] % 4 == 0:
                    out.append((mk, {d: ["x", "y"]}, True))
                if shape[d] % 2 == 0:
                    out.append((mk, {d: ["y"]}, True))
            for d in range(rank):
                for e in range(rank):
                    if d != e and shape[d] % 2 == 0 and shape[e] % 2 == 0:
                        out.append((mk, {d: ["x"], e: ["y"]}, True))
                        break
                else:
                    continue
                break
    return out


def assign_tag(mk, assign):
    return mk + "_" + "_".join("d%d%s" % (d, "".join(a)) for d, a in sorted(assign.items()))


# --------------------------------------------------------------------------
# StableHLO interpreter tests


CHECK_RE = re.compile(r"^\s*(?:\"check\.(expect_\w+)\"\s*\(|check\.(expect_\w+)\s+)(%[\w#]+)")
VALUE_RE = re.compile(r"^  (%[A-Za-z_][\w]*|%\d+)\s*=\s*(\"?stablehlo\.\w+.*)$")
CONST_RE = re.compile(
    r"^  (%[\w]+)\s*=\s*(?:stablehlo\.constant\s+(.*)\s:\s(tensor<.*>)|"
    r"\"stablehlo\.constant\"\(\)\s*\{\s*value\s*=\s*(.*)\}\s*:\s*\(\)\s*->\s*(tensor<.*>))\s*$"
)


class Program:
    """A runnable base program and how to shard it."""

    def __init__(self, source, name, text):
        self.source = source  # interp / own / shardy
        self.name = name  # unique id prefix
        self.text = text  # the unsharded (or as-given) module
        self.variants = []  # (id, text)


def interp_function(chunk, fname, fstart, sig_end, bstart, bend, funcs):
    """The test function fname of chunk, taken apart for interp_render: its
    body's lines without the checks and the closing return, the checked
    values (returned instead), its top-level constants and one-line op
    results [(ssa, shape, elt, line index, type, lines)], the chunk's other
    functions but the other test functions. None when a check or return is
    of a form the sweep does not rewrite."""
    body = chunk[bstart:bend]
    lines = body.split("\n")
    keep = []
    rets = []
    consts = []
    vals = []
    for a, b in statements(lines):
        stmt = " ".join(s.strip() for s in lines[a:b])
        m = CHECK_RE.match(lines[a])
        if m:
            kind = m.group(1) or m.group(2)
            if kind == "expect_serialized_eq":
                return None
            ty = top_type(stmt)
            if ty is None:
                return None
            if m.group(1):  # generic form: (T, ...) -> ()
                tm = re.search(r":\s*\((.*)\)\s*->\s*\(\)\s*$", stmt)
                if not tm:
                    return None
                ty = tm.group(1)
                depth = 0
                for k, ch in enumerate(ty):
                    if ch == "<":
                        depth += 1
                    elif ch == ">":
                        depth -= 1
                    elif ch == "," and depth == 0:
                        ty = ty[:k]
                        break
            if parse_tensor(ty) is None:
                return None
            rets.append((m.group(3), ty.strip()))
            continue
        if "check." in stmt or "custom_call" in stmt and "check" in stmt:
            return None
        if re.match(r"^\s*(func\.)?return\b", lines[a]):
            if stmt.strip() not in ("func.return", "return"):
                return None
            continue
        cm = CONST_RE.match("  " + stmt.strip())
        if cm:
            ty = cm.group(3) or cm.group(5)
            pt = parse_tensor(ty)
            if pt is not None and len(pt[0]) >= 1 and all(x >= 1 for x in pt[0]):
                consts.append((cm.group(1), pt[0], pt[1], len(keep), ty.strip(), b - a))
        else:
            vm = VALUE_RE.match(lines[a].rstrip()) if b - a == 1 else None
            if vm:
                body_ = vm.group(2)
                ty = body_.rsplit("->", 1)[1] if "->" in body_ else top_type(stmt)
                pt = parse_tensor(ty) if ty else None
                if pt is not None and len(pt[0]) >= 1 and all(x >= 1 for x in pt[0]):
                    vals.append((vm.group(1), pt[0], pt[1], len(keep), ty.strip(), 1))
        keep.extend(lines[a:b])
    if not rets:
        return None
    # the module: the chunk's other non-test functions, then @main
    pre = []
    for (n, s, se, bs, be) in funcs:
        if n == fname:
            continue
        if re.match(r"\s*\(\s*\)\s*\{", chunk[chunk.index("(", s):bs]) and "check." in chunk[bs:be]:
            continue  # another test function
        pre.append(chunk[s : be + 1])
    head = chunk[: funcs[0][1]]
    head = "\n".join(l for l in head.split("\n") if not l.strip().startswith("//"))
    return {
        "head": head.strip(),
        "pre": pre,
        "body": keep,
        "rets": rets,
        "consts": consts,
        "vals": vals,
        "fname": fname,
    }


def interp_render(f, mesh=None, wrap=None, args=None):
    """The module text of f (from interp_function): wrap maps a constant's
    ssa name to its sharding spec (sharding_constraint), args maps one to
    its spec as an argument (the constant line dropped)."""
    wrap = wrap or {}
    args = args or {}
    body = []
    params = []
    by_line = {c[3]: c for c in f["consts"] + f["vals"]}
    lines = f["body"]
    k = 0
    while k < len(lines):
        line = lines[k]
        c = by_line.get(k)
        if c is not None and c[0] in args:
            params.append("%s: %s {sdy.sharding = #sdy.sharding<@mesh, %s>}" % (c[0], c[4], args[c[0]]))
            k += c[5]
            continue
        if c is not None and c[0] in wrap:
            new = "%sc_" + c[0][1:]
            body.append(line.replace(c[0], new, 1))
            body.extend(lines[k + 1 : k + c[5]])
            body.append("  %s = sdy.sharding_constraint %s <@mesh, %s> : %s" % (c[0], new, wrap[c[0]], c[4]))
            k += c[5]
            continue
        body.append(line)
        k += 1
    rets = f["rets"]
    rtypes = ", ".join(t for _, t in rets)
    out = []
    if mesh is not None:
        out.append("sdy.mesh @mesh = <%s>" % MESHES[mesh])
    if f["head"]:
        out.append(f["head"])
    out.extend(f["pre"])
    out.append("func.func @main(%s) -> (%s) {" % (", ".join(params), rtypes))
    out.extend(body)
    out.append("  func.return %s : %s" % (", ".join(v for v, _ in rets), rtypes))
    out.append("}")
    return "\n".join(out) + "\n"


def interp_programs(folder):
    progs = []
    skipped = collections.Counter()
    for path in sorted(os.listdir(folder)):
        if not path.endswith(".mlir"):
            continue
        text = open(os.path.join(folder, path), encoding="utf-8").read()
        if "run_parallel" in text or "interpreter." in text and "run_parallel" in text:
            skipped["interp: run_parallel (collectives' tests)"] += 1
            continue
        chunks = re.split(r"^// -----\s*$", text, flags=re.M)
        for ci, chunk in enumerate(chunks):
            funcs = find_funcs(chunk)
            for (n, s, se, bs, be) in funcs:
                sig = chunk[se:bs]
                params = chunk[chunk.index("(", s) : se]
                if params.replace(" ", "") != "()" or "check." not in chunk[bs:be]:
                    continue
                if "->" in sig:
                    continue
                f = interp_function(chunk, n, s, se, bs, be, funcs)
                if f is None:
                    skipped["interp: a check or return the sweep does not rewrite"] += 1
                    continue
                name = "interp/%s/%s" % (path[:-5], n)
                p = Program("interp", name, interp_render(f))
                p.f = f
                progs.append(p)
    return progs, skipped


def interp_variants(p):
    f = p.f
    out = []
    for c in f["consts"]:
        ssa, shape, elt = c[0], c[1], c[2]
        for mk, assign, divides in sharding_choices(shape):
            sp = spec(len(shape), assign)
            tag = "%s_%s%s" % (ssa[1:], assign_tag(mk, assign), "" if divides else "_pad")
            out.append(("%s/sc_%s" % (p.name, tag), interp_render(f, mk, wrap={ssa: sp})))
            if elt in ("f32", "f64", "bf16", "f16"):
                out.append(("%s/arg_%s" % (p.name, tag), interp_render(f, mk, args={ssa: sp})))
    # an op's result constrained (a reshard between ops): the first
    # choices of each mesh
    for c in f["vals"]:
        ssa, shape = c[0], c[1]
        seen = set()
        for mk, assign, divides in sharding_choices(shape):
            if mk in seen:
                continue
            seen.add(mk)
            sp = spec(len(shape), assign)
            tag = "%s_%s%s" % (ssa[1:], assign_tag(mk, assign), "" if divides else "_pad")
            out.append(("%s/scv_%s" % (p.name, tag), interp_render(f, mk, wrap={ssa: sp})))
    # every constant sharded on its first dividing dim over x=2
    allw = {}
    for c in f["consts"]:
        for d, sz in enumerate(c[1]):
            if sz % 2 == 0:
                allw[c[0]] = spec(len(c[1]), {d: ["x"]})
                break
    if len(allw) >= 2:
        out.append(("%s/sc_all_x2" % p.name, interp_render(f, "x2", wrap=allw)))
    return out


# --------------------------------------------------------------------------
# Programs with arguments: ours and Shardy's


MESH_RE = re.compile(r'sdy\.mesh\s+@([\w.$-]+)\s*=\s*<\s*\[([^\]]*)\]([^>]*)>')
AXIS_RE = re.compile(r'"([\w.$-]+)"\s*=\s*(\d+)')


def main_args(text):
    """@main's arguments: [(start, end, name, type, sharding span or None)]
    with the offsets of the whole argument text."""
    for (n, s, se, bs, be) in find_funcs(text):
        if n != "main":
            continue
        i = text.index("(", s)
        params = text[i + 1 : se - 1]
        out = []
        d = 0
        k0 = 0
        in_str = False
        pieces = []
        for k, ch in enumerate(params):
            if in_str:
                if ch == '"' and params[k - 1] != "\\":
                    in_str = False
                continue
            if ch == '"':
                in_str = True
            elif ch in "(<[{":
                d += 1
            elif ch in ")>]}":
                d -= 1
            elif ch == "," and d == 0:
                pieces.append((k0, k))
                k0 = k + 1
        if params.strip():
            pieces.append((k0, len(params)))
        for a, b in pieces:
            piece = params[a:b]
            m = re.match(r"\s*(%[\w]+)\s*:\s*(tensor<[^{]*>)\s*(\{.*\})?\s*$", piece, re.S)
            if not m:
                out.append(None)
                continue
            out.append((i + 1 + a, i + 1 + b, m.group(1), m.group(2).strip(), m.group(3)))
        return out
    return None


LOWERED_RE = re.compile(r"\bsdy\.(all_reduce|all_gather|all_slice|all_to_all|collective_permute|reduce_scatter)\b")


def arg_variants(p):
    """Re-shard one argument of @main at a time, and resize mesh axes."""
    text = p.text
    out = []
    meshes = [(m.group(1), AXIS_RE.findall(m.group(2)), m) for m in MESH_RE.finditer(text)]
    args = main_args(text) or []
    if LOWERED_RE.search(text):
        # collectives written for the arguments' shardings (an all-reduce
        # of what they leave partial): re-sharding an argument would make
        # the program wrong, not the executor
        args = []
    for ai, a in enumerate(args):
        if a is None:
            continue
        start, end, ssa, ty, attrs = a
        pt = parse_tensor(ty)
        if pt is None or not pt[0]:
            continue
        shape = pt[0]
        if attrs and "sdy.sharding" in attrs:
            mm = re.search(r"#sdy\.sharding<@([\w.$-]+)", attrs)
            mesh_name = mm.group(1) if mm else None
        else:
            mesh_name = meshes[0][0] if meshes else None
        mesh = next((x for x in meshes if x[0] == mesh_name), None)
        if mesh is None or "device_ids" in mesh[2].group(3):
            continue
        axes = [(n, int(s)) for n, s in mesh[1] if int(s) > 1]
        for d in range(len(shape)):
            for an, asz in axes:
                if shape[d] < 2:
                    continue
                sh = "#sdy.sharding<@%s, %s>" % (mesh_name, spec(len(shape), {d: [an]}))
                if attrs and "sdy.sharding" in attrs:
                    new_attrs = re.sub(r"#sdy\.sharding<@[^>]*>", lambda _m: sh, attrs, count=1)
                elif attrs:
                    new_attrs = attrs.rstrip()[:-1].rstrip() + ", sdy.sharding = %s}" % sh
                else:
                    new_attrs = "{sdy.sharding = %s}" % sh
                piece = " %s: %s %s" % (ssa, ty, new_attrs)
                vt = text[:start] + piece + text[end:]
                tag = "arg%d_d%d%s%s" % (ai, d, an, "" if shape[d] % asz == 0 else "_pad")
                out.append(("%s/%s" % (p.name, tag), vt))
    for mesh_name, axes, m in meshes:
        if "device_ids" in m.group(3):
            continue
        for k, (an, asz) in enumerate(axes):
            for ns in (1, 2, 4):
                if ns == int(asz):
                    continue
                new = list(axes)
                new[k] = (an, str(ns))
                total = 1
                for _, s in new:
                    total *= int(s)
                if total > 8:
                    continue
                body = ", ".join('"%s"=%s' % x for x in new)
                vt = text[: m.start(2)] + body + text[m.end(2) :]
                out.append(("%s/mesh_%s_%s%d" % (p.name, mesh_name, an, ns), vt))
    return out


def split_parts(text):
    """`//--- name` parts of a split-file test: {name: text}."""
    parts = {}
    cur = None
    for line in text.split("\n"):
        m = re.match(r"^//---\s+(\S+)\s*$", line)
        if m:
            cur = m.group(1)
            parts[cur] = []
            continue
        if cur is not None:
            parts[cur].append(line)
    return {k: "\n".join(v) + "\n" for k, v in parts.items()}


def own_programs(root):
    progs = []
    skipped = collections.Counter()
    ex = os.path.join(root, "examples")
    for path in sorted(os.listdir(ex)) if os.path.isdir(ex) else []:
        if path.endswith(".mlir"):
            text = open(os.path.join(ex, path), encoding="utf-8").read()
            progs.append(Program("own", "own/examples/%s" % path[:-5], text))
    lit = os.path.join(root, "tests", "lit")
    for path in sorted(os.listdir(lit)) if os.path.isdir(lit) else []:
        if not (path.startswith("run_") and path.endswith(".mlir")):
            continue
        text = open(os.path.join(lit, path), encoding="utf-8").read()
        for part, ptext in sorted(split_parts(text).items()):
            if "check." in ptext or "// CHECKOP" in ptext and "check." in ptext:
                skipped["own: a part with check ops (run on one device only)"] += 1
                continue
            progs.append(Program("own", "own/%s/%s" % (path[:-5], part[:-5]), ptext))
    return progs, skipped


def rename_main(text, fname):
    """text with function fname as @main, alone with the functions it
    refers to (transitively): each of part1's functions is a program of its
    own, and a module whose other functions hold explicit collectives
    counts as partitioned as a whole."""
    if fname != "main":
        text = re.sub(r"@main\b", "@main__orig", text)
        text = re.sub(r"@%s\b" % re.escape(fname), "@main", text)
    funcs = find_funcs(text)
    bodies = {n: (s, be) for (n, s, se, bs, be) in funcs}
    want = {"main"}
    todo = ["main"]
    while todo:
        s, be = bodies[todo.pop()]
        for ref in re.findall(r"@([\w.$-]+)", text[s : be + 1]):
            if ref in bodies and ref not in want:
                want.add(ref)
                todo.append(ref)
    out = []
    k = 0
    for (n, s, se, bs, be) in funcs:
        out.append(text[k:s])
        if n in want:
            out.append(text[s : be + 1])
        k = be + 1
    out.append(text[k:])
    return "".join(out)


def shardy_programs(folder):
    progs = []
    skipped = collections.Counter()
    for path in sorted(os.listdir(folder)):
        if "executable" not in path or not path.endswith(".mlir"):
            continue
        text = open(os.path.join(folder, path), encoding="utf-8").read()
        part1 = split_parts(text).get("part1.mlir")
        if part1 is None:
            skipped["shardy: no part1.mlir"] += 1
            continue
        for (n, s, se, bs, be) in find_funcs(part1):
            head = part1[s:se]
            if "private" in head.split("@")[0]:
                continue
            progs.append(Program("shardy", "shardy/%s/%s" % (path[:-5], n), rename_main(part1, n)))
    return progs, skipped


# --------------------------------------------------------------------------
# Running


def norm_message(msg):
    """A refusal's message with its numbers, names and paths made generic,
    so that refusals count by kind."""
    msg = re.sub(r"@[\w.$-]+", "@F", msg)
    msg = re.sub(r"%[\w#]+", "%V", msg)
    msg = re.sub(r"tensor<[^>]*>", "tensor<T>", msg)
    msg = re.sub(r"\b\d+\b", "N", msg)
    msg = re.sub(r'"[^"]*"', '"S"', msg)
    return msg[:140]


def run_one(shardplan, text, timeout, keep_path=None):
    """(class, detail) of one module through `shardplan run`."""
    with tempfile.NamedTemporaryFile("w", suffix=".mlir", delete=False) as fh:
        fh.write(text)
        path = fh.name
    if keep_path:
        with open(keep_path, "w", encoding="utf-8") as kh:
            kh.write(text)
    try:
        try:
            r = subprocess.run(
                [shardplan, "run", path, "--iters", "1", "--json"],
                capture_output=True,
                text=True,
                timeout=timeout,
                errors="replace",
            )
        except subprocess.TimeoutExpired:
            return "TIMEOUT", "timeout after %gs" % timeout
        except OSError as e:
            return "CRASH", "could not run %s: %s" % (shardplan, e)
    finally:
        os.unlink(path)
    err = r.stderr
    if r.returncode < 0 or "Sanitizer" in err or "runtime error:" in err:
        sig = "signal %d" % -r.returncode if r.returncode < 0 else "sanitizer"
        line = next((l for l in err.split("\n") if "ERROR" in l or "runtime error" in l), "")
        return "CRASH", sig + (": " + line.strip()[:160] if line else "")
    for stream in (r.stdout, err):
        for line in stream.split("\n"):
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                j = json.loads(line)
            except ValueError:
                continue
            if "error" in j:
                e = j["error"]
                msg = "%s" % e.get("message", "")
                if "replicas disagree" in msg:
                    # the devices holding one replicated value computed
                    # different answers: a wrong answer the run caught
                    return "MISMATCH", msg
                return "REFUSED", msg
            if "numerics" in j:
                nm = j["numerics"]
                if nm.get("match"):
                    return "MATCH", ""
                return "MISMATCH", json.dumps(nm)[:200]
            if "checks" in j:
                return "REFUSED", "module with checks (not partitioned)"
    return "CRASH", "no answer (exit %d): %s" % (r.returncode, (err or r.stdout).strip()[:160])


def stride(vs, cap):
    """At most cap of vs, taken at an even stride (the first kept)."""
    if cap <= 0 or len(vs) <= cap:
        return vs
    step = len(vs) / float(cap)
    return [vs[int(k * step)] for k in range(cap)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("shardplan")
    ap.add_argument("--stablehlo", default=os.path.join(ROOT, "..", "shared", "reference", "stablehlo", "interpret"))
    ap.add_argument("--shardy", default=os.path.join(ROOT, "..", "shared", "reference", "shardy", "tests"))
    ap.add_argument("--root", default=ROOT)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--quick-cap", type=int, default=240)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--per-program", type=int, default=24)
    ap.add_argument("--timeout", type=float, default=20.0)
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--only", default=None)
    ap.add_argument("--keep", default=None)
    ap.add_argument("--known", default=os.path.join(HERE, "known.txt"))
    ap.add_argument("-v", action="store_true")
    a = ap.parse_args()
    if not os.access(a.shardplan, os.X_OK):
        print("sweep.py: %s is not an executable" % a.shardplan, file=sys.stderr)
        return 2
    t0 = time.time()
    progs = []
    not_variants = collections.Counter()
    if os.path.isdir(a.stablehlo):
        p, s = interp_programs(a.stablehlo)
        progs += p
        not_variants.update(s)
    else:
        print("sweep.py: %s is not a folder; StableHLO's tests skipped" % a.stablehlo)
    p, s = own_programs(a.root)
    progs += p
    not_variants.update(s)
    if os.path.isdir(a.shardy):
        p, s = shardy_programs(a.shardy)
        progs += p
        not_variants.update(s)
    else:
        print("sweep.py: %s is not a folder; Shardy's tests skipped" % a.shardy)
    for p in progs:
        p.variants = interp_variants(p) if p.source == "interp" else arg_variants(p)
        if p.source != "interp":
            p.variants.insert(0, (p.name + "/as_given", p.text))
        p.variants = stride(p.variants, a.per_program)
    if a.only:
        for p in progs:
            p.variants = [v for v in p.variants if a.only in v[0]]
        progs = [p for p in progs if p.variants]
    if a.quick:
        # a bounded subset: each source's share of --quick-cap, its programs
        # round-robin, each program's variants taken at a stride so that
        # the meshes and modes mix
        sources = sorted(set(p.source for p in progs))
        keep = set()
        for src in sources:
            sp = [p for p in progs if p.source == src]
            quota = a.quick_cap // len(sources)
            per = max(1, quota // max(1, len(sp)))
            chosen = [stride(p.variants, per + 1) for p in sp]
            k = 0
            n = 0
            while n < quota and any(k < len(c) for c in chosen):
                for c in chosen:
                    if k < len(c) and n < quota:
                        keep.add(c[k][0])
                        n += 1
                k += 1
        for p in progs:
            p.variants = [v for v in p.variants if v[0] in keep]
        progs = [p for p in progs if p.variants]
    if a.list:
        for p in progs:
            for vid, _ in p.variants:
                print(vid)
        return 0
    known = set()
    if os.path.exists(a.known):
        for line in open(a.known, encoding="utf-8"):
            line = line.split("#")[0].strip()
            if line:
                known.add(line)
    if a.keep:
        os.makedirs(a.keep, exist_ok=True)

    def keep_path(name):
        return os.path.join(a.keep, name.replace("/", "__") + ".mlir") if a.keep else None

    # the bases first: a program the executor refuses unsharded is no variant
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
        interp = [p for p in progs if p.source == "interp"]
        base = dict(zip((p.name for p in interp), pool.map(lambda p: run_one(a.shardplan, p.text, a.timeout), interp)))
    runnable = []
    for p in progs:
        cls, det = base.get(p.name, ("MATCH", ""))
        if cls != "MATCH":
            not_variants["base %s: %s" % (cls, norm_message(det))] += len(p.variants)
            if a.v:
                print("BASE %s %s %s" % (cls, p.name, det))
            continue
        runnable.append(p)
    jobs = [(p, vid, vt) for p in runnable for vid, vt in p.variants]
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
        results = list(pool.map(lambda j: run_one(a.shardplan, j[2], a.timeout, keep_path(j[1])), jobs))
    per_src = collections.OrderedDict()
    refused = collections.Counter()
    bugs = collections.Counter()
    bad_new = []
    fixed_known = []
    for (p, vid, _), (cls, det) in zip(jobs, results):
        per_src.setdefault(p.source, collections.Counter())[cls] += 1
        if cls == "REFUSED":
            refused[norm_message(det)] += 1
        if cls in ("MISMATCH", "CRASH", "TIMEOUT"):
            bugs[cls] += 1
            print("%s %s %s" % (cls, vid, det))
            if vid not in known:
                bad_new.append(vid)
        elif vid in known:
            fixed_known.append(vid)
        if a.v and cls == "REFUSED":
            print("REFUSED %s %s" % (vid, det))
    print()
    print("refusals by message:")
    for msg, n in refused.most_common():
        print("  %5d  %s" % (n, msg))
    if not_variants:
        print("not variants (sources skipped, bases the executor refuses on one device):")
        for msg, n in not_variants.most_common():
            if n:
                print("  %5d  %s" % (n, msg))
    print()
    classes = ("MATCH", "MISMATCH", "REFUSED", "CRASH", "TIMEOUT")
    tot = collections.Counter()
    for src, c in per_src.items():
        tot.update(c)
        n = sum(c.values())
        print(
            "%-7s %5d variants: %s"
            % (src, n, ", ".join("%d %s" % (c[k], k.lower()) for k in classes))
        )
    n = sum(tot.values())
    print(
        "total   %5d variants: %s"
        % (n, ", ".join("%d %s" % (tot[k], k.lower()) for k in classes))
    )
    ran = tot["MATCH"] + tot["MISMATCH"]
    if ran:
        print("mismatch rate: %.1f%% of the variants that ran (%d of %d), %.1f%% of all" % (100.0 * tot["MISMATCH"] / ran, tot["MISMATCH"], ran, 100.0 * tot["MISMATCH"] / max(1, n)))
    for vid in fixed_known:
        print("known bug now passes (remove it from %s): %s" % (os.path.basename(a.known), vid))
    passed = tot["MATCH"] + tot["REFUSED"]
    failed = n - passed
    print("%d passed, %d failed (%d new, %d known) in %.0f s" % (passed, failed, len(bad_new), failed - len(bad_new), time.time() - t0))
    return 1 if bad_new else 0


if __name__ == "__main__":
    sys.exit(main())
