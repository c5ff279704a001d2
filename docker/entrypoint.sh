#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Entrypoint of the Shardplan image (installed as bin/shardplan-entrypoint
# next to bin/shardplan).
#
#   shardplan-entrypoint [serve] [FLAGS]   the server (the default command)
#   shardplan-entrypoint healthcheck       GET /healthz on the configured port
#   shardplan-entrypoint COMMAND ...       any other shardplan command (backup, token, ...)
#
# The server reads its configuration from SHARDPLAN_* itself (docs/operations.md);
# this script adds only what a container needs before it starts:
#   - SHARDPLAN_ADMIN_TOKEN_FILE (entrypoint only): a file (a Docker secret)
#     whose first line is an admin token, 32..256 printable characters
#     without spaces; it is stored hashed (as `shardplan token` stores tokens)
#     unless already present, so restarts and replicas are idempotent;
#   - SHARDPLAN_WEB defaults to the installed dashboard when one was built.
# Then it execs the server, which becomes PID 1 and gets SIGTERM directly
# (graceful drain, see STOPSIGNAL in the Dockerfile).
set -eu

# Variables this script reads that the server does not (tests/docker/check.sh).
ENTRYPOINT_VARS="SHARDPLAN_ADMIN_TOKEN_FILE"

bindir=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd)
shardplan=$bindir/shardplan

die() {
    echo "shardplan-entrypoint: $*" >&2
    exit 1
}

# URL of /healthz for SHARDPLAN_LISTEN (HOST:PORT or [V6]:PORT); wildcard
# addresses are reached through loopback.
health_url() {
    listen=${SHARDPLAN_LISTEN:-127.0.0.1:8080}
    port=${listen##*:}
    host=${listen%:*}
    case "$host" in
    '' | 0.0.0.0) host=127.0.0.1 ;;
    '[::]' | '::') host='[::1]' ;;
    \[*) ;;
    *:*) host="[$host]" ;;
    esac
    echo "http://$host:$port/healthz"
}

# Stores the admin token of SHARDPLAN_ADMIN_TOKEN_FILE (its first line),
# hashed, unless it is stored already: `shardplan token import` checks it
# (32..256 printable characters without spaces) and keeps restarts idempotent.
import_admin_token() {
    f=$SHARDPLAN_ADMIN_TOKEN_FILE
    [ -r "$f" ] || die "SHARDPLAN_ADMIN_TOKEN_FILE: cannot read '$f'"
    "$shardplan" token import "$f" --scope admin --label docker-secret ||
        die "cannot store the admin token of '$f'"
}

cmd=${1:-serve}
case "$cmd" in
healthcheck)
    exec curl -fsS --max-time 3 -o /dev/null "$(health_url)"
    ;;
serve | -*)
    [ "$cmd" = serve ] && [ $# -gt 0 ] && shift
    if [ -n "${SHARDPLAN_ADMIN_TOKEN_FILE:-}" ]; then
        import_admin_token
    fi
    if [ -z "${SHARDPLAN_WEB:-}" ] && [ -f "$bindir/../share/shardplan/web/index.html" ]; then
        SHARDPLAN_WEB=$(CDPATH='' cd -- "$bindir/../share/shardplan/web" && pwd)
        export SHARDPLAN_WEB
    fi
    exec "$shardplan" serve "$@"
    ;;
*)
    exec "$shardplan" "$@"
    ;;
esac
