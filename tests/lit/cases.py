#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Case-by-case conformance measurement against Shardy's lit files (or
XLA's: --tests ../shared/reference/xla/tests).

run.sh says whether a whole file passes; this says how many of its cases do,
which is the figure the conformance issues are measured in. A case is:
  - in a file whose RUN line splits its input (-split-input-file), each
    `// -----` chunk alone, run through the file's RUN lines (the chunk is
    both the tool's input and FileCheck's check file; a chunk with no check
    line of its own, only expected diagnostics, passes when the tool does);
  - in any other file, each CHECK-LABEL section: the tool runs on the whole
    file once per RUN line, and FileCheck checks that output against a check
    file holding only the section's check lines (plus check lines that come
    before the first label). A file with no label is one case.
RUN lines are rewritten as run.sh does (sdy_opt -> shardplan opt, FileCheck ->
FileCheck-14, stablehlo-translate -> shardplan interpret, split-file,
%S/run_sdy_interpreter_test.sh -> ours in tests/lit, `not`, %s, %S, %t).

Usage: cases.py SHARDPLAN [--tests DIR] [--folder SUBSTR] [--files F...]
                [--failures] [--jobs N]
Prints one line per file (passed/cases) and a per-folder table (folder from
MANIFEST.txt). --failures lists each failing case as FILE#N.
"""

import argparse
import collections
import concurrent.futures
import os
import re
import shlex
import shutil
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
INTERP_SCRIPT = os.path.join(HERE, "run_sdy_interpreter_test.sh")
SPLIT_FILE = os.environ.get("SPLIT_FILE") or (
    "split-file" if shutil.which("split-file") else "/usr/lib/llvm-14/bin/split-file")
SPLIT = re.compile(r"^// -----\s*$", re.M)
RUN = re.compile(r"^\s*//\s*RUN:(.*)$")


def run_lines(text):
    out, cur = [], ""
    for line in text.split("\n"):
        m = RUN.match(line)
        if not m:
            continue
        body = m.group(1).rstrip()
        if body.endswith("\\"):
            cur += body[:-1] + " "
            continue
        out.append(cur + body)
        cur = ""
    if cur:
        out.append(cur)
    return out


def check_prefixes(cmd):
    m = re.search(r"--?check-prefix(?:es)?[= ]([\w,-]+)", cmd)
    return m.group(1).split(",") if m else ["CHECK"]


def rewrite(cmd, shardplan, filecheck, tool_input, check_file, tmp, fc_extra="",
            no_checks=False):
    """One RUN pipeline as a bash command: the tool reads tool_input,
    FileCheck reads check_file as its check file. no_checks: check_file has
    none of FileCheck's directives (a chunk that only expects diagnostics),
    so FileCheck's part only drains its input: in a whole-file run the other
    chunks' directives check the output, none of them this chunk's."""
    parts = cmd.split("|")
    out = []
    for part in parts:
        is_fc = re.search(r"(^|\s)FileCheck(\s|$)", part) is not None
        if is_fc and no_checks:
            out.append(" cat >/dev/null ")
            continue
        p = re.sub(r"(^|[^\w.-])sdy_opt($|[^\w.-])",
                   lambda m: m.group(1) + shlex.quote(shardplan) + " opt" + m.group(2), part)
        p = re.sub(r"(^|\s)FileCheck(\s|$)",
                   lambda m: m.group(1) + filecheck + fc_extra + m.group(2), p)
        p = re.sub(r"(^|[^\w.-])stablehlo-translate($|[^\w.-])",
                   lambda m: m.group(1) + shlex.quote(shardplan) + " interpret" + m.group(2), p)
        p = re.sub(r"(^|[^\w.-])split-file($|[^\w.-])",
                   lambda m: m.group(1) + shlex.quote(SPLIT_FILE) + m.group(2), p)
        p = p.replace("%S/run_sdy_interpreter_test.sh", shlex.quote(INTERP_SCRIPT))
        p = p.replace("%s", shlex.quote(check_file if is_fc else tool_input))
        p = p.replace("%S", shlex.quote(os.path.dirname(tool_input)))
        p = p.replace("%t", shlex.quote(tmp))
        out.append(p)
    return "|".join(out)


def sh(cmd, timeout, cwd):
    """Runs cmd in cwd (a case's scratch folder: RUN lines that write
    relative files, `> t1.mlir`, write there, as lit's temp dir)."""
    script = ("not() { if \"$@\"; then return 1; else return 0; fi; }\n"
              "export -f not\n" + cmd)
    try:
        r = subprocess.run(["bash", "-o", "pipefail", "-c", script],
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=timeout, cwd=cwd)
        return r.returncode, r.stdout
    except subprocess.TimeoutExpired:
        return 124, b"timeout"


def label_sections(text, prefixes):
    """Splits the check lines of text into CHECK-LABEL sections."""
    pat = re.compile(r"//\s*(%s)(-LABEL|-NEXT|-SAME|-DAG|-NOT|-EMPTY)?(?:\{LITERAL\})?:"
                     % "|".join(re.escape(p) for p in prefixes))
    head, sections = [], []
    for line in text.split("\n"):
        m = pat.search(line)
        if not m:
            continue
        if m.group(2) == "-LABEL":
            sections.append([line])
        elif sections:
            sections[-1].append(line)
        else:
            head.append(line)
    # Each section keeps every CHECK-LABEL line of the file, so its checks
    # are bounded by the labels around it as in a whole-file run (a
    # CHECK-NOT stops at the next function; a label that prefixes a later
    # function's name cannot match that function).
    out = []
    for i in range(len(sections)):
        lines = list(head)
        for j, s in enumerate(sections):
            lines.extend(s if j == i else s[:1])
        out.append(lines)
    return out or [head]


def measure_file(path, args, work):
    text = open(path, encoding="utf-8", errors="replace").read()
    cmds = run_lines(text)
    if not cmds:
        return [(1, False)]
    split = any("-split-input-file" in c for c in cmds)
    results = []
    if split:
        for i, chunk in enumerate(SPLIT.split(text)):
            f = os.path.join(work, "chunk%d.mlir" % i)
            with open(f, "w") as fh:
                fh.write(chunk)
            ok = True
            for j, c in enumerate(cmds):
                # the whole file is FileCheck's check file in a lit run: a
                # prefix the file uses elsewhere may be absent from a chunk
                extra = (" --allow-unused-prefixes"
                         if all(re.search(r"//\s*%s(-[A-Z]+)?(\{LITERAL\})?:" % re.escape(p),
                                          text)
                                for p in check_prefixes(c)) else "")
                directive = r"//\s*(%s)(-[A-Z]+)?(\{LITERAL\})?:" % "|".join(
                    re.escape(p) for p in check_prefixes(c))
                rc, _ = sh(rewrite(c, args.shardplan, args.filecheck, f, f,
                                   os.path.join(work, "t%d" % i), extra,
                                   no_checks=re.search(directive, chunk) is None
                                   and re.search(directive, text) is not None),
                           args.timeout, work)
                if rc != 0:
                    ok = False
                    break
            results.append((i + 1, ok))
        return results
    # Label sections: each RUN line once, FileCheck per section.
    prefixes = set()
    for c in cmds:
        prefixes.update(check_prefixes(c))
    sections = label_sections(text, sorted(prefixes))
    ok = [True] * len(sections)
    for j, c in enumerate(cmds):
        for k, sec in enumerate(sections):
            if not ok[k]:
                continue
            cf = os.path.join(work, "sec%d.mlir" % k)
            with open(cf, "w") as fh:
                fh.write("\n".join(sec) + "\n")
            # a section may lack some of the RUN line's prefixes
            rc, _ = sh(rewrite(c, args.shardplan, args.filecheck, path, cf,
                               os.path.join(work, "t%d" % k),
                               " --allow-unused-prefixes"),
                       args.timeout, work)
            if rc != 0:
                ok[k] = False
    return [(k + 1, v) for k, v in enumerate(ok)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("shardplan")
    ap.add_argument("--tests", default=os.environ.get(
        "SHARDY_TESTS", "../shared/reference/shardy/tests"))
    ap.add_argument("--filecheck", default=os.environ.get("FILECHECK", "FileCheck-14"))
    ap.add_argument("--folder", action="append", default=[])
    ap.add_argument("--files", nargs="*", default=[])
    ap.add_argument("--failures", action="store_true")
    ap.add_argument("--timeout", type=int, default=60)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    args.shardplan = os.path.abspath(args.shardplan)
    args.tests = os.path.abspath(args.tests)  # RUN lines run in scratch folders
    os.environ["SHARDPLAN"] = args.shardplan  # for run_sdy_interpreter_test.sh
    manifest = {}
    # A folder without MANIFEST.txt (XLA's tests) is one folder, named after
    # its parent (../shared/reference/xla/tests -> "xla").
    default_folder = os.path.basename(os.path.dirname(os.path.abspath(args.tests))) or "?"
    mpath = os.path.join(args.tests, "MANIFEST.txt")
    if os.path.exists(mpath):
        for line in open(mpath):
            p = line.split()
            if len(p) >= 2:
                manifest[p[0]] = os.path.dirname(p[1]).replace("shardy/dialect/sdy/", "")
    names = sorted(n for n in os.listdir(args.tests) if n.endswith(".mlir"))
    if args.files:
        want = {os.path.basename(f) for f in args.files}
        names = [n for n in names if n in want]
    if args.folder:
        names = [n for n in names
                 if any(s in manifest.get(n, default_folder) for s in args.folder)]
    per_file = {}
    with tempfile.TemporaryDirectory() as tmp:
        def one(n):
            work = os.path.join(tmp, n)
            os.makedirs(work)
            return n, measure_file(os.path.join(args.tests, n), args, work)
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as ex:
            for n, res in ex.map(one, names):
                per_file[n] = res
    table = collections.OrderedDict()
    for n in names:
        res = per_file[n]
        good = sum(1 for _, ok in res if ok)
        print("%-70s %4d/%-4d" % (n, good, len(res)))
        if args.failures:
            for i, ok in res:
                if not ok:
                    print("    FAIL %s#%d" % (n, i))
        folder = manifest.get(n, default_folder)
        f, c, p = table.get(folder, (0, 0, 0))
        table[folder] = (f + 1, c + len(res), p + good)
    print()
    print("| folder | files | cases | pass |")
    print("|---|---|---|---|")
    tf = tc = tp = 0
    for folder in sorted(table):
        f, c, p = table[folder]
        tf, tc, tp = tf + f, tc + c, tp + p
        print("| %s | %d | %d | %d |" % (folder, f, c, p))
    print("| all | %d | %d | %d |" % (tf, tc, tp))


if __name__ == "__main__":
    main()
