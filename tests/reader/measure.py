#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""How much of a folder of MLIR files the reader takes, and whether the
round trip is byte-stable.

For each *.mlir file (each `// -----` chunk with --split, or when the
file's RUN line has -split-input-file), runs
`shardplan opt FILE` (and, with --debuginfo, `-mlir-print-debuginfo`) and
counts:
  read     the reader accepted it and the printer wrote it (exit 0);
  stable   printing what was printed gives the same bytes again
           (print(read(print(read(x)))) == print(read(x))).
Default folder: StableHLO's JAX-lowered test programs (stablehlo/testdata,
2,839 files at openxla/stablehlo 3c9301c), which are not in the repository:
extract them from a clone, e.g.
  git -C STABLEHLO archive HEAD stablehlo/testdata | tar -x -C /tmp/shlo
Usage: measure.py SHARDPLAN [DIR...] [--split | --whole] [--debuginfo] [--failures N]
                  [--jobs N]
Prints the counts and, with --failures N, the first line of the first N
errors grouped by message (most frequent first).
"""

import argparse
import collections
import concurrent.futures
import os
import re
import subprocess
import tempfile

SPLIT = re.compile(r"^// -----\s*$", re.M)


def run(tool, text, flags):
    p = subprocess.run([tool, "opt", "-"] + flags, input=text.encode(), capture_output=True,
                       timeout=120)
    return p.returncode, p.stdout, p.stderr.decode(errors="replace")


def one(tool, text, flags):
    """(status, message): status is 'fail', 'unstable' or 'ok'."""
    try:
        rc, out, err = run(tool, text, flags)
    except subprocess.TimeoutExpired:
        return "fail", "timeout"
    if rc != 0:
        msg = err.strip().split("\n")[0] if err.strip() else "exit %d" % rc
        return "fail", msg
    try:
        rc2, out2, err2 = run(tool, out.decode(errors="replace"), flags)
    except subprocess.TimeoutExpired:
        return "unstable", "timeout on the second read"
    if rc2 != 0:
        return "unstable", "second read: " + (err2.strip().split("\n")[0] if err2 else "")
    if out2 != out:
        return "unstable", "second print differs"
    return "ok", ""


def normalise(msg):
    """Groups messages that differ only in positions and names."""
    msg = re.sub(r"^[^:]*:\d+:\d+: ", "", msg)
    msg = re.sub(r"<stdin>:\d+:\d+", "L:C", msg)
    msg = re.sub(r"\d+", "N", msg)
    return msg[:140]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("shardplan")
    ap.add_argument("dirs", nargs="*", default=["/tmp/shlo/stablehlo/testdata"])
    ap.add_argument("--split", action="store_true")
    ap.add_argument("--whole", action="store_true", help="never split (each file one input)")
    ap.add_argument("--debuginfo", action="store_true")
    ap.add_argument("--failures", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args()
    tool = os.path.abspath(a.shardplan)
    flags = ["-mlir-print-debuginfo"] if a.debuginfo else []
    inputs = []
    for d in a.dirs:
        for f in sorted(os.listdir(d)):
            if not f.endswith(".mlir"):
                continue
            with open(os.path.join(d, f), encoding="utf-8", errors="replace") as fh:
                text = fh.read()
            # a file whose RUN line splits its input is split alike
            split = not a.whole and (a.split or
                                     re.search(r"^//\s*RUN:.*-split-input-file", text, re.M))
            chunks = SPLIT.split(text) if split else [text]
            for i, c in enumerate(chunks):
                inputs.append(("%s#%d" % (f, i) if split else f, c))
    counts = collections.Counter()
    msgs = collections.Counter()
    example = {}
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as ex:
        for (name, _), (st, msg) in zip(inputs, ex.map(lambda x: one(tool, x[1], flags), inputs)):
            counts[st] += 1
            if st != "ok":
                k = st + ": " + normalise(msg)
                msgs[k] += 1
                example.setdefault(k, name + ": " + msg)
    n = len(inputs)
    read = counts["ok"] + counts["unstable"]
    print("inputs %d  read %d (%.1f%%)  byte-stable %d (%.1f%%)" %
          (n, read, 100.0 * read / max(n, 1), counts["ok"], 100.0 * counts["ok"] / max(n, 1)))
    for k, c in msgs.most_common(a.failures):
        print("%5d  %s\n       e.g. %s" % (c, k, example[k][:300]))


if __name__ == "__main__":
    main()
