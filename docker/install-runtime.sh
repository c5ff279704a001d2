#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runtime stage of docker/Dockerfile, also run by `make docker-check` on the host.
#
#   docker/install-runtime.sh [--root DIR] [--dry-run] [--no-apt]
#
# 1. installs docker/packages-runtime.txt with apt (only with --root /, and
#    only the missing ones; --no-apt skips it);
# 2. creates the group and user shardplan (uid/gid 10001, home
#    /var/lib/shardplan, no login shell) in DIR's /etc with groupadd/useradd
#    --prefix DIR, so a temporary DIR gets passwd/group entries and the host's
#    users are untouched;
# 3. creates DIR/var/lib/shardplan (the database volume), owned by that user, mode 0750.
# --dry-run prints the commands instead of running them. Needs root unless --dry-run.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=/ dry=0 apt=1
SP_UID=10001
SP_USER=shardplan
SP_HOME=/var/lib/shardplan

while [ $# -gt 0 ]; do
    case "$1" in
    --root) root=${2:?--root needs a directory}; shift ;;
    --root=*) root=${1#--root=} ;;
    --dry-run) dry=1 ;;
    --no-apt) apt=0 ;;
    *) echo "usage: docker/install-runtime.sh [--root DIR] [--dry-run] [--no-apt]" >&2; exit 2 ;;
    esac
    shift
done
root=$(cd "$root" && pwd)

run() {
    if [ "$dry" = 1 ]; then
        printf '+'; printf ' %q' "$@"; printf '\n'
    else
        "$@"
    fi
}

if [ "$dry" = 0 ] && [ "$(id -u)" != 0 ]; then
    echo "install-runtime.sh: needs root (or --dry-run)" >&2
    exit 1
fi

# 1. packages: into the image only; a temporary root shares the host's.
if [ "$apt" = 1 ] && [ "$root" = / ]; then
    missing=""
    for p in $(sed -e 's/#.*//' "$here/packages-runtime.txt"); do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
            missing="$missing $p"
    done
    if [ -n "$missing" ]; then
        run apt-get update -qq
        run env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing
    fi
fi

# 2. the user. --prefix only for another root: it is then the root's /etc that changes.
pfx=()
[ "$root" = / ] || pfx=(--prefix "$root")
if ! grep -q "^$SP_USER:" "$root/etc/group" 2>/dev/null; then
    run groupadd "${pfx[@]}" --gid "$SP_UID" "$SP_USER"
fi
if ! grep -q "^$SP_USER:" "$root/etc/passwd" 2>/dev/null; then
    run useradd "${pfx[@]}" --uid "$SP_UID" --gid "$SP_UID" --home-dir "$SP_HOME" \
        --no-create-home --no-log-init --shell /usr/sbin/nologin "$SP_USER"
fi

# 3. the database volume's mount point.
run install -d -o "$SP_UID" -g "$SP_UID" -m 0750 "${root%/}$SP_HOME"
