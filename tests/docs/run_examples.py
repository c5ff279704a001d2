#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Docs that run (make doc-test; the conventions are in docs/examples.md).

Every fenced block of README.md and docs/*.md whose info string is
`sh example` (or `console example`: a transcript, whose `$ ` lines are the
commands) is run, command by command, against a fresh server this
runner starts for that file (127.0.0.1, ephemeral port, a new database at
var/shardplan.db of a temporary working directory). The working directory
holds examples/ and profiles/ (links to the repository's), build/rel (a
link to the binary's folder, so ./build/rel/shardplan is the binary under
test) and the placeholders the docs use: model.mlir (examples/flax_mlp.mlir),
$B and http://127.0.0.1:8080 (the server). The
shardplan binary is not on PATH: a doc must say ./build/rel/shardplan.

A command fails when it exits non-zero (a pipeline's SIGPIPE into `head`
excepted), when its output holds a server error ({"error":{"code"...) or a
client error (HTTP 4xx/5xx) that its expectation does not name, or when an
expectation is missing from its output. An expectation is a trailing
comment `# -> TEXT` (or a `# -> TEXT` line right after the command): TEXT
must occur in the command's stdout or stderr; `# -> exit N` asks for exit
status N instead of 0.

A `python example` block is one command: python3 runs the whole block
(clients/python importable, $B in the environment), and its `# -> TEXT`
comments are its expectations. Blocks that need JAX are not marked.

A block whose info string is `text output` right after an example block is
the output the doc shows for it: each of its lines must be printed by the
block's commands, in order (a shown line may continue the printed line the
one before it matched); `...` in a line stands for anything on that
printed line, a line of only `...` for any lines.

Blocks of one file share one shell, in order, so variables and files
carry from one to the next.

    python3 tests/docs/run_examples.py SHARDPLAN_BINARY [FILE.md ...]
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC_TIMEOUT_S = 90
DOC_URL = "http://127.0.0.1:8080"
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*(.*)$")
EXPECT = re.compile(r"(?:^|\s)#\s*->\s?(.*)$")
SERVER_ERROR = re.compile(r'"error"\s*:\s*\{\s*"code"')
CLIENT_ERROR = re.compile(r"\bHTTP [45]\d\d\b")


class Command:
    def __init__(self, doc, line, text):
        self.doc, self.line, self.text = doc, line, text
        self.expect = []
        self.shown = None  # (line, [lines]) of a `text output` block after its example block


def is_output(info):
    words = info.split()
    return len(words) >= 2 and "output" in words[1:]


def is_example(info):
    words = info.split()
    return (len(words) >= 2 and words[0] in ("sh", "bash", "console", "python")
            and "example" in words[1:])


def python_block(rel, line, body):
    """A `python example` block: one command, the block run by python3 with
    clients/python importable; its `# -> TEXT` comments are expectations."""
    src = "\n".join(text for _, text in body)
    c = Command(rel, line, "PYTHONPATH=%s${PYTHONPATH:+:$PYTHONPATH} python3 - <<'__SHARDPLAN_PY_EOF'\n%s\n__SHARDPLAN_PY_EOF"
                % (os.path.join(REPO, "clients", "python"), src))
    for _, text in body:
        m = EXPECT.search(text)
        if m:
            c.expect.append(m.group(1).strip())
    return c


def parse(path):
    """The example commands of one Markdown file, in order."""
    rel = os.path.relpath(path, REPO)
    lines = open(path, encoding="utf-8").read().split("\n")
    cmds, i, last_block = [], 0, None
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, info = m.group(2), m.group(3)
        j = i + 1
        body = []
        while j < len(lines) and not lines[j].strip().startswith(fence):
            body.append((j + 1, lines[j]))
            j += 1
        if is_example(info):
            lang = info.split()[0]
            if lang == "python":
                block = [python_block(rel, i + 1, body)]
            else:
                if lang == "console":
                    body = console_commands(body)
                block = parse_block(rel, body)
            cmds.extend(block)
            last_block = block
        elif is_output(info) and last_block:
            # the output shown for the example block just before
            last_block[-1].shown = (i + 1, [t for _, t in body])
            last_block[-1].block = last_block
            last_block = None
        else:
            last_block = None
        i = j + 1
    return cmds


def console_commands(body):
    """A transcript's commands: its `$ ` lines (with their continuations);
    the lines between are the output shown, not checked."""
    out, cont = [], False
    for n, line in body:
        if line.startswith("$ ") or cont:
            text = line[2:] if line.startswith("$ ") and not cont else line
            out.append((n, text))
            cont = text.rstrip().endswith("\\")
    return out


def parse_block(rel, body):
    cmds, k = [], 0
    while k < len(body):
        n, line = body[k]
        k += 1
        s = line.strip()
        if s == "":
            continue
        if s.startswith("#"):
            m = EXPECT.match(s)
            if m and cmds:
                cmds[-1].expect.append(m.group(1).strip())
            continue
        text = line
        while text.rstrip().endswith("\\") and k < len(body):
            text = text.rstrip() + "\n" + body[k][1]
            k += 1
        cmd = Command(rel, n, text.strip())
        # a trailing `# -> TEXT` on the command's last line
        last = cmd.text.split("\n")[-1]
        m = EXPECT.search(last)
        if m:
            cmd.expect.append(m.group(1).strip())
        cmds.append(cmd)
    return cmds


def start_server(binary, work):
    p = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:0", "--db", "var/shardplan.db",
                          "--log", "", "--bench-time-limit", "60"],
                         cwd=work, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    t0, seen = time.time(), ""
    while time.time() - t0 < 20:
        line = p.stderr.readline()
        if line == "":
            break
        seen += line
        m = re.search(r"listening on (http://127\.0\.0\.1:\d+)/", line)
        if m:
            return p, m.group(1)
    p.kill()
    raise RuntimeError("server did not start: " + seen)


def stop_server(p):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def setup_work(binary):
    work = tempfile.mkdtemp(prefix="shardplan-docs-")
    for d in ("examples", "profiles"):
        os.symlink(os.path.join(REPO, d), os.path.join(work, d))
    os.makedirs(os.path.join(work, "build"))
    os.symlink(os.path.dirname(binary), os.path.join(work, "build", "rel"))
    os.makedirs(os.path.join(work, "var"))
    shutil.copy(os.path.join(REPO, "examples", "flax_mlp.mlir"), os.path.join(work, "model.mlir"))
    return work


def script(cmds, base, out):
    """One bash script running cmds in order in the current shell, each with
    its output and status in out/N.*."""
    s = ["set -o pipefail", "export B=%s" % base,
         "export SHARDPLAN_SERVER=", "export SHARDPLAN_TOKEN="]
    for i, c in enumerate(cmds):
        text = c.text.replace(DOC_URL, base)
        tag = "__SHARDPLAN_DOC_EOF_%d" % i
        s.append("__c=$(cat <<'%s'\n%s\n%s\n)" % (tag, text, tag))
        s.append("echo %d > %s/current" % (i, out))
        s.append('{ eval "$__c"; } > %s/%d.out 2> %s/%d.err < /dev/null' % (out, i, out, i))
        s.append("echo $? > %s/%d.rc" % (out, i))
    return "\n".join(s) + "\n"


def shown_regexps(lines):
    """A shown output's lines as regexps: `...` stands for anything (a line
    of only `...` for any lines), runs of white space for any white space or none."""
    res = []
    for line in lines:
        t = line.strip()
        if t == "" or t == "...":
            continue
        parts = [r"\s*".join(re.escape(w) for w in p.split()) for p in t.split("...")]
        res.append((t, re.compile(r".*?".join(parts))))
    return res


def judge_shown(c, out, first):
    """The shown output of c's block, in order, against what the block's
    commands (first..c) printed; a failure message or None."""
    text = ""
    for k in range(first, first + len(c.block)):
        for ext in ("out", "err"):
            try:
                text += open("%s/%d.%s" % (out, k, ext), errors="replace").read()
            except OSError:
                pass
    at = 0
    for t, rx in shown_regexps(c.shown[1]):
        m = rx.search(text, at)  # within one printed line: `...` does not cross line ends
        if m is None:
            return "shown output line (%s:%d) not printed (in order): %s" % (c.doc, c.shown[0], t[:200])
        at = m.end()
    return None


def judge(c, out, i):
    """The failure message of command i, or None."""
    try:
        rc = int(open("%s/%d.rc" % (out, i)).read())
    except (OSError, ValueError):
        return "did not finish"
    stdout = open("%s/%d.out" % (out, i), errors="replace").read()
    stderr = open("%s/%d.err" % (out, i), errors="replace").read()
    both = stdout + stderr
    piped_head = re.search(r"\|\s*head\b", c.text) is not None
    want_rc = [int(m.group(1)) for m in (re.fullmatch(r"exit (\d+)", e) for e in c.expect) if m]
    expect = [e for e in c.expect if not re.fullmatch(r"exit \d+", e)]
    if want_rc:
        if rc != want_rc[0]:
            return "exit %d, expected %d: %s" % (rc, want_rc[0], both.strip()[-600:])
    elif rc != 0 and not (piped_head and rc in (141, 23)):
        return "exit %d: %s" % (rc, both.strip()[-600:])
    named = " ".join(expect)
    if SERVER_ERROR.search(both) and "error" not in named:
        return "server error in output: %s" % both.strip()[:600]
    if CLIENT_ERROR.search(stderr) and "HTTP" not in named:
        return "client error: %s" % stderr.strip()[:600]
    norm = " ".join(both.split())
    for e in expect:
        if e not in both and " ".join(e.split()) not in norm:
            return "expected %r in output: %s" % (e, both.strip()[:600])
    return None


def run_doc(binary, path, cmds):
    work = setup_work(binary)
    out = os.path.join(work, ".out")
    os.makedirs(out)
    server = None
    failures = []
    try:
        server, base = start_server(binary, work)
        env = {k: v for k, v in os.environ.items() if not k.startswith("SHARDPLAN_")}
        env["PATH"] = ":".join(p for p in env.get("PATH", "").split(":")
                               if not os.path.exists(os.path.join(p or ".", "shardplan")))
        try:
            subprocess.run(["bash", "-c", script(cmds, base, out)], cwd=work, env=env,
                           timeout=DOC_TIMEOUT_S, stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            failures.append("%s: over %d s" % (path, DOC_TIMEOUT_S))
        for i, c in enumerate(cmds):
            why = judge(c, out, i)
            if why is None and c.shown is not None:
                why = judge_shown(c, out, i + 1 - len(c.block))
            if why is not None:
                failures.append("%s:%d: %s\n    %s" % (c.doc, c.line, c.text.split("\n")[0], why))
    finally:
        if server is not None:
            stop_server(server)
        shutil.rmtree(work, ignore_errors=True)
    return failures


def main():
    if len(sys.argv) < 2:
        print(__doc__.split("\n\n")[-1].strip(), file=sys.stderr)
        return 2
    binary = os.path.abspath(sys.argv[1])
    files = sys.argv[2:] or (["README.md"] + sorted(
        os.path.join("docs", f) for f in os.listdir(os.path.join(REPO, "docs")) if f.endswith(".md")))
    total, failures = 0, []
    t0 = time.time()
    for f in files:
        cmds = parse(os.path.join(REPO, f))
        if not cmds:
            continue
        total += len(cmds)
        t1 = time.time()
        fails = run_doc(binary, f, cmds)
        print("== %s: %d commands, %d failed (%.1f s)" % (f, len(cmds), len(fails), time.time() - t1))
        for x in fails:
            print("  FAIL " + x)
        failures.extend(fails)
    print("doc-test: %d example commands in %.1f s, %d failed" % (total, time.time() - t0, len(failures)))
    return 1 if failures or total == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
