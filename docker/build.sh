#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Build stage of docker/Dockerfile, also run by `make docker-check` on the host.
#
#   docker/build.sh --deps-only          install the build packages (apt), nothing else
#   docker/build.sh [--no-deps] [--no-web] PREFIX
#                                        packages, `make all`, the dashboard, then
#                                        install into PREFIX (e.g. /out/usr/local)
#
# Packages: docker/packages-build.txt (a subset of the Makefile's DEB_PKGS),
# plus docker/packages-web.txt when web/package.json exists. Packages already
# installed (dpkg-query) are skipped, so on a prepared machine no apt runs.
# The dashboard step is a no-op unless web/package.json exists; then it runs
# the Makefile's `web` target when there is one and installs $BUILD/web.
# Environment: BUILD (make's out-of-tree dir, default build), JOBS (default nproc).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
BUILD=${BUILD:-build}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
deps=1 build=1 web=1 prefix=""

usage() {
    echo "usage: docker/build.sh --deps-only | [--no-deps] [--no-web] PREFIX" >&2
    exit 2
}
while [ $# -gt 0 ]; do
    case "$1" in
    --deps-only) build=0 ;;
    --no-deps) deps=0 ;;
    --no-web) web=0 ;;
    -*) usage ;;
    *) [ -z "$prefix" ] || usage; prefix=$1 ;;
    esac
    shift
done
[ "$build" = 0 ] || [ -n "$prefix" ] || usage

# The packages named in the given list files (comments and blank lines skipped).
read_list() {
    sed -e 's/#.*//' "$@" | tr -s ' \t' '\n' | sed '/^$/d'
}

has_web() {
    [ "$web" = 1 ] && [ -f "$repo/web/package.json" ]
}

# apt-get install of whatever in the lists is missing; nothing when all are present.
install_packages() {
    local missing="" p
    for p in $(read_list "$@"); do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
            missing="$missing $p"
    done
    if [ -z "$missing" ]; then
        echo "build.sh: build packages present"
        return 0
    fi
    if [ "$(id -u)" != 0 ]; then
        echo "build.sh: need root to install:$missing" >&2
        exit 1
    fi
    echo "build.sh: installing:$missing"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing
}

if [ "$deps" = 1 ]; then
    lists=("$here/packages-build.txt")
    if has_web; then
        lists+=("$here/packages-web.txt")
    fi
    install_packages "${lists[@]}"
fi
[ "$build" = 1 ] || exit 0

make -C "$repo" --no-print-directory BUILD="$BUILD" -j"$JOBS" all
case "$BUILD" in /*) out=$BUILD ;; *) out=$repo/$BUILD ;; esac

webdir=""
if has_web; then
    if make -C "$repo" -n web BUILD="$BUILD" >/dev/null 2>&1; then
        make -C "$repo" --no-print-directory BUILD="$BUILD" web
        [ -f "$out/web/index.html" ] && webdir=$out/web
    else
        echo "build.sh: web/package.json exists but the Makefile has no 'web' target; dashboard skipped" >&2
    fi
else
    echo "build.sh: dashboard step skipped (no web/package.json, or --no-web)"
fi

# Install: the binary, the entrypoint, and read-only runtime files.
install -d "$prefix/bin" "$prefix/share/shardplan"
install -m 0755 "$out/rel/shardplan" "$prefix/bin/shardplan"
install -m 0755 "$here/entrypoint.sh" "$prefix/bin/shardplan-entrypoint"
cp -R "$repo/profiles" "$repo/examples" "$prefix/share/shardplan/"
install -m 0644 "$repo/docs/operations.md" "$prefix/share/shardplan/operations.md"
if [ -n "$webdir" ]; then
    rm -rf "$prefix/share/shardplan/web"
    cp -R "$webdir" "$prefix/share/shardplan/web"
fi
echo "build.sh: installed into $prefix"
