#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make docker-check`: proves docker/ builds and runs without a Docker engine.
#  1. static: the Dockerfile's COPY/ADD sources and the scripts and lists its
#     RUN lines name exist; compose's build context, Dockerfile and secrets
#     directory exist; every SHARDPLAN_* variable in Dockerfile, compose.yml
#     and entrypoint.sh is one the server reads (server/*.c, cmd/*.c: option_names and
#     getenv) or one the entrypoint declares in ENTRYPOINT_VARS; the build
#     package list is a subset of the Makefile's DEB_PKGS.
#  2. docker/build.sh into a temporary prefix (apt skipped when the packages
#     are present; dashboard skipped); every NEEDED library of the installed
#     binary comes from a package in docker/packages-runtime.txt (or libc6).
#  3. docker/install-runtime.sh into a temporary root: passwd/group entries
#     and the volume directory there, the host's users untouched; --dry-run
#     for the real root prints valid commands.
#  4. the installed entrypoint serves on 127.0.0.1 (free port): healthcheck,
#     the admin token from a secret file works (auth on), a graph is stored,
#     `shardplan backup` runs while serving, SIGTERM stops it cleanly; then the
#     backup is restored over the database path and the server serves the data.
# Environment: BUILD (make's out-of-tree dir), DEB_PKGS (from the Makefile).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
BUILD=${BUILD:-build}
tmp=$(mktemp -d /tmp/shardplan-docker-check.XXXXXX)
server_pid=""
cleanup() {
    if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
        kill -KILL "$server_pid" 2>/dev/null || true
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
fails=0
ok() { echo "docker-check: ok   $*"; }
bad() {
    echo "docker-check: FAIL $*" >&2
    fails=$((fails + 1))
}
die() {
    echo "docker-check: FAIL $*" >&2
    exit 1
}

# ---- 1. static checks --------------------------------------------------------------------
df=docker/Dockerfile
compose=docker/compose.yml
[ -f "$df" ] && [ -f "$compose" ] && [ -f docker/entrypoint.sh ] || die "docker/ files missing"

# Dockerfile lines with continuations joined.
joined=$(sed -e ':a' -e '/\\$/N; s/\\\n/ /; ta' "$df" | grep -v '^[[:space:]]*#')
while read -r instr rest; do
    case "$instr" in COPY | ADD) ;; *) continue ;; esac
    # shellcheck disable=SC2206
    args=($rest)
    from=0 srcs=()
    for a in "${args[@]}"; do
        case "$a" in
        --from=*) from=1 ;;
        --*) ;;
        *) srcs+=("$a") ;;
        esac
    done
    [ "$from" = 1 ] && continue # a path of the build stage, checked in step 2
    n=${#srcs[@]}
    for ((i = 0; i < n - 1; i++)); do
        s=${srcs[i]}
        if compgen -G "$s" >/dev/null || [ -e "$s" ]; then
            ok "COPY source $s"
        else
            bad "$df: $instr source '$s' does not exist in the repository"
        fi
    done
done <<<"$joined"
# Scripts and lists named anywhere in RUN lines, by their docker/ file name.
for f in $(grep -E '^RUN ' <<<"$joined" | grep -oE '[A-Za-z0-9_./-]+\.(sh|txt)' | sort -u); do
    base=docker/$(basename "$f")
    if [ -f "$base" ]; then ok "RUN references $base"; else bad "$df: RUN names '$f', no $base"; fi
    case "$base" in *.sh) [ -x "$base" ] || bad "$base is not executable" ;; esac
done
# Every docker/ file the Dockerfile COPYs by name is also run or read.
for s in build.sh install-runtime.sh packages-build.txt packages-runtime.txt packages-web.txt; do
    grep -q "docker/$s" "$df" || bad "$df does not copy docker/$s"
done
ep=$(sed -n 's/^ENTRYPOINT \["\([^"]*\)".*/\1/p' "$df")
[ "$(basename "$ep")" = shardplan-entrypoint ] || bad "ENTRYPOINT '$ep' is not the installed entrypoint"
grep -q '^HEALTHCHECK .*healthcheck' <<<"$joined" || bad "no HEALTHCHECK through the entrypoint"
grep -q '^STOPSIGNAL SIGTERM' "$df" || bad "no STOPSIGNAL SIGTERM"
grep -qE '^USER [1-9]' "$df" || bad "the runtime user is not a non-root uid"
grep -q '^VOLUME .*/var/lib/shardplan' "$df" || bad "no VOLUME /var/lib/shardplan"

# compose: build context and Dockerfile relative to docker/, secrets directory.
ctx=$(sed -n 's/^ *context: *//p' "$compose")
cdf=$(sed -n 's/^ *dockerfile: *//p' "$compose")
[ -d "docker/$ctx" ] && [ -f "docker/$ctx/$cdf" ] && ok "compose build $ctx/$cdf" ||
    bad "$compose: build context '$ctx' / dockerfile '$cdf' not found"
for sf in $(sed -n 's/^ *file: *//p' "$compose"); do
    # Secrets are made by the operator (docker/secrets/README.md): their directory must exist.
    d=$(dirname "docker/$sf")
    [ -d "$d" ] && [ -f "$d/README.md" ] && ok "compose secret directory $d" ||
        bad "$compose: secret '$sf' has no directory with a README"
done

# Variables: what the server reads, what the entrypoint adds, what docker/ uses.
names=$(sed -n '/option_names\[\] *=/,/};/p' server/srv_app.c | grep -oE '"[a-z-]+"' | tr -d '"')
[ -n "$names" ] || die "cannot find option_names in server/srv_app.c"
server_vars=$( {
    for n in $names; do echo "SHARDPLAN_$(tr 'a-z-' 'A-Z_' <<<"$n")"; done
    grep -ohE 'getenv\("SHARDPLAN_[A-Z0-9_]+"\)' server/*.c cmd/*.c | grep -oE 'SHARDPLAN_[A-Z0-9_]+'
} | sort -u)
ep_vars=$(sed -n 's/^ENTRYPOINT_VARS="\(.*\)"/\1/p' docker/entrypoint.sh)
for v in $ep_vars; do
    grep -qx "$v" <<<"$server_vars" && bad "entrypoint variable $v is also a server variable"
    [ "$(grep -c "$v" docker/entrypoint.sh)" -gt 1 ] || bad "entrypoint declares $v but does not use it"
done
for f in "$df" "$compose" docker/entrypoint.sh; do
    for v in $(grep -oE 'SHARDPLAN_[A-Z0-9_]+' "$f" | sort -u); do
        if grep -qx "$v" <<<"$server_vars"; then
            ok "$f: $v (server)"
        elif grep -qw "$v" <<<"$ep_vars"; then
            ok "$f: $v (entrypoint)"
        else
            bad "$f uses $v, which neither the server nor the entrypoint reads"
        fi
    done
done

# Package lists: the build list is part of the Makefile's DEB_PKGS.
if [ -n "${DEB_PKGS:-}" ]; then
    for p in $(sed -e 's/#.*//' docker/packages-build.txt); do
        grep -qw -- "$p" <<<"$DEB_PKGS" || bad "docker/packages-build.txt: $p is not in the Makefile's DEB_PKGS"
    done
fi
[ "$fails" = 0 ] || die "$fails static check(s) failed"

# ---- 2. build into a temporary prefix ----------------------------------------------------
prefix=$tmp/root/usr/local
BUILD=$BUILD docker/build.sh --no-web "$prefix" >"$tmp/build.log" 2>&1 ||
    { tail -20 "$tmp/build.log" >&2; die "docker/build.sh failed"; }
for f in bin/shardplan bin/shardplan-entrypoint share/shardplan/profiles share/shardplan/operations.md; do
    [ -e "$prefix/$f" ] || bad "build.sh did not install $f"
done
ok "build.sh installed into a temporary prefix"
# The runtime list covers the binary's direct shared libraries.
runtime_pkgs=$(sed -e 's/#.*//' docker/packages-runtime.txt)
for lib in $(objdump -p "$prefix/bin/shardplan" | awk '/NEEDED/ {print $2}'); do
    # awk reads all its input (no early exit): under pipefail a SIGPIPE would fail the script.
    path=$(ldconfig -p | awk -v l="$lib" '$1 == l && p == "" {p = $NF} END {print p}')
    pkg=""
    for cand in "$path" "$(readlink -f "$path")" "/usr${path#/usr}" "${path#/usr}"; do
        pkg=$(dpkg -S "$cand" 2>/dev/null | awk -F: 'NR == 1 {print $1}') || true
        [ -n "$pkg" ] && break
    done
    if [ "$pkg" = libc6 ] || grep -qx "$pkg" <<<"$runtime_pkgs"; then
        ok "runtime library $lib from $pkg"
    else
        bad "the binary needs $lib (package '${pkg:-?}'), not in docker/packages-runtime.txt"
    fi
done

# ---- 3. runtime user setup in a temporary root -------------------------------------------
root=$tmp/root
mkdir -p "$root/etc"
grep '^root:' /etc/passwd >"$root/etc/passwd"
grep '^root:' /etc/group >"$root/etc/group"
printf 'root:*:19000:0:99999:7:::\n' >"$root/etc/shadow"
printf 'root:*::\n' >"$root/etc/gshadow"
host_has=$(getent passwd shardplan >/dev/null && echo yes || echo no)
docker/install-runtime.sh --dry-run --root / >"$tmp/dry.txt" || bad "install-runtime.sh --dry-run failed"
grep -q 'useradd .*--uid 10001' "$tmp/dry.txt" || [ "$host_has" = yes ] || bad "dry run has no useradd"
if [ "$(id -u)" = 0 ]; then
    docker/install-runtime.sh --root "$root" >"$tmp/rt.log" 2>&1 || { cat "$tmp/rt.log" >&2; bad "install-runtime.sh --root failed"; }
    grep -q '^shardplan:x:10001:10001::/var/lib/shardplan:/usr/sbin/nologin$' "$root/etc/passwd" || bad "no shardplan user in the temporary root"
    grep -q '^shardplan:x:10001:' "$root/etc/group" || bad "no shardplan group in the temporary root"
    [ "$(stat -c '%u %a' "$root/var/lib/shardplan")" = "10001 750" ] || bad "volume directory not 10001, 0750"
    docker/install-runtime.sh --root "$root" >/dev/null 2>&1 || bad "install-runtime.sh is not idempotent"
    ok "install-runtime.sh set the user up in a temporary root"
else
    mkdir -p "$root/var/lib/shardplan"
    echo "docker-check: not root: user setup checked with --dry-run only"
fi
[ "$host_has" = "$(getent passwd shardplan >/dev/null && echo yes || echo no)" ] || bad "the host's users changed"

# ---- 4. run the installed server through the entrypoint ----------------------------------
data=$root/var/lib/shardplan
db=$data/shardplan.db
secret=$tmp/admin_token
printf 'spt_%s\n' "$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')" >"$secret"
tok=$(head -n 1 "$secret")
entry=$prefix/bin/shardplan-entrypoint

# start_server DB: runs the entrypoint on 127.0.0.1:0 in the background and sets port.
start_server() {
    : >"$tmp/server.err"
    env -i PATH="$PATH" HOME="$tmp" SHARDPLAN_LISTEN=127.0.0.1:0 SHARDPLAN_DB="$1" \
        SHARDPLAN_AUTH=on SHARDPLAN_LOG="$tmp/requests.log" SHARDPLAN_DRAIN=5 \
        SHARDPLAN_ADMIN_TOKEN_FILE="$secret" "$entry" >"$tmp/server.out" 2>"$tmp/server.err" &
    server_pid=$!
    port=""
    for _ in $(seq 1 100); do
        port=$(sed -n 's|.*listening on http://127\.0\.0\.1:\([0-9]*\)/.*|\1|p' "$tmp/server.err")
        [ -n "$port" ] && break
        kill -0 "$server_pid" 2>/dev/null || { cat "$tmp/server.err" >&2; die "server exited at start"; }
        sleep 0.1
    done
    [ -n "$port" ] || die "server did not report its port"
    SHARDPLAN_LISTEN=127.0.0.1:$port "$entry" healthcheck || die "healthcheck failed"
    ok "server on 127.0.0.1:$port, /healthz through the entrypoint"
}

# stop_server: SIGTERM, wait, expect exit 0 and the shutdown messages.
stop_server() {
    kill -TERM "$server_pid"
    local rc=0
    wait "$server_pid" || rc=$?
    server_pid=""
    [ "$rc" = 0 ] || bad "server exited with $rc after SIGTERM"
    grep -q 'shardplan: stopped' "$tmp/server.err" || bad "no clean stop in the server log"
    ok "SIGTERM: exit $rc"
}

B=http://127.0.0.1
start_server "$db"
code=$(curl -s -o /dev/null -w '%{http_code}' "$B:$port/v1/graphs")
[ "$code" = 401 ] && ok "no token: 401" || bad "no token: HTTP $code, expected 401"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $tok" "$B:$port/v1/graphs")
[ "$code" = 200 ] && ok "admin token from the secret file: 200" || bad "secret token: HTTP $code"
code=$(curl -s -o "$tmp/post.json" -w '%{http_code}' -H "Authorization: Bearer $tok" \
    -H 'Content-Type: application/json' --data-binary @examples/flax_mlp.json "$B:$port/v1/graphs?name=mlp")
[ "$code" = 201 ] && ok "graph stored" || bad "POST /v1/graphs: HTTP $code"
curl -s -H "Authorization: Bearer $tok" "$B:$port/v1/graphs/1?raw=1" >"$tmp/before.json"
# Online backup while the server serves (and keeps serving).
"$prefix/bin/shardplan" backup "$data/backup.db" --db "$db" 2>"$tmp/backup.err" ||
    { cat "$tmp/backup.err" >&2; bad "shardplan backup failed while serving"; }
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $tok" \
    -H 'Content-Type: application/json' -d '{"axes":[{"name":"x","size":2}]}' -X PUT "$B:$port/v1/meshes/after")
[ "$code" = 201 ] && ok "server writes after the backup" || bad "PUT after backup: HTTP $code"
stop_server
[ "$(sqlite3 "$data/backup.db" 'PRAGMA integrity_check')" = ok ] && ok "backup integrity_check" ||
    bad "backup fails integrity_check"
# Token import is idempotent across restarts.
[ "$(sqlite3 "$db" "SELECT count(*) FROM tokens WHERE label = 'docker-secret'")" = 1 ] ||
    bad "admin token not stored exactly once"

# Restore as docs/operations.md says: server stopped, remove -wal/-shm, copy over the path.
rm -f "$db-wal" "$db-shm"
cp "$data/backup.db" "$db"
start_server "$db"
curl -s -H "Authorization: Bearer $tok" "$B:$port/v1/graphs/1?raw=1" >"$tmp/after.json"
cmp -s "$tmp/before.json" "$tmp/after.json" && [ -s "$tmp/after.json" ] &&
    ok "restored database serves the graph" || bad "restored graph differs"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $tok" "$B:$port/v1/meshes/after")
[ "$code" = 404 ] && ok "restored database is the backup's snapshot" || bad "mesh written after backup: HTTP $code"
stop_server
[ "$(sqlite3 "$db" "SELECT count(*) FROM tokens WHERE label = 'docker-secret'")" = 1 ] ||
    bad "admin token duplicated after restore"

[ "$fails" = 0 ] || die "$fails check(s) failed"
echo "docker-check: all passed"
