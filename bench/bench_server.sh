#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make bench-server`: wrk against shardplan serve and a minimal
# libmicrohttpd handler, both on 127.0.0.1 (free ports) in the same run:
# GET /v1/plans/{id}, POST /v1/plans with the Flax MLP (the same request, so
# the stored plan answers), POST of distinct MLP-sized plans (each request's
# batch size differs, so each is planned and stored), and the minimal
# handler. Prints requests/s, p99, errors and the server's RSS after each
# run and its peak, and the targets (GET >= 50% of the minimal handler's
# rate, POST of the stored plan >= 2,000 req/s, distinct POST >= 5,000 req/s).
# Usage: bench_server.sh SHARDPLAN BENCH_MIN SECONDS [CONNECTIONS]
set -euo pipefail
bin=$1; minbin=$2; secs=${3:-5}; conns=${4:-32}
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT

"$minbin" > "$tmp/min.out" & pids+=($!)
"$bin" serve --listen 127.0.0.1:0 --db "$tmp/bench.db" --log '' 2> "$tmp/serve.err" & pids+=($!)
for _ in $(seq 100); do
  grep -q '^port' "$tmp/min.out" 2>/dev/null && grep -q 'listening' "$tmp/serve.err" 2>/dev/null && break
  sleep 0.05
done
minport=$(awk '/^port/ {print $2}' "$tmp/min.out")
port=$(grep -o 'http://127.0.0.1:[0-9]*' "$tmp/serve.err" | head -1 | sed 's/.*://')
[ -n "$minport" ] && [ -n "$port" ] || { echo "bench-server: servers did not start" >&2; cat "$tmp/serve.err" >&2; exit 1; }
base=http://127.0.0.1:$port
id=$(curl -sf -H 'Content-Type: application/json' --data-binary @"$root/examples/flax_mlp.json" \
     "$base/v1/plans" | sed -n 's/^{"id":\([0-9]*\).*/\1/p')
[ -n "$id" ] || { echo "bench-server: planning the MLP failed" >&2; exit 1; }
cat > "$tmp/post.lua" <<LUA
local f = io.open("$root/examples/flax_mlp.json", "rb")
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
LUA
# Distinct plans: each wrk thread numbers its requests apart from the
# others' and rewrites the batch size (8 -> 10, 12, ...), so no two requests
# hash alike and every one is planned and stored. The body is cut once at
# each "tensor<8x1024" and a request joins the pieces around its own size:
# the load generator shares the server's 2 cores, and searching the text
# again per request (string.gsub) cost it about 100 us of CPU a request,
# a sixth of the machine at 3,000 req/s.
cat > "$tmp/distinct.lua" <<LUA
local f = io.open("$root/examples/flax_mlp.json", "rb")
local base = f:read("*a")
f:close()
local pieces, at = {}, 1
while true do
  local s, e = string.find(base, "tensor<8x1024", at, true)
  if s == nil then break end
  pieces[#pieces + 1] = string.sub(base, at, s - 1)
  at = e + 1
end
pieces[#pieces + 1] = string.sub(base, at)
assert(#pieces > 1, "no tensor<8x1024 in the example")
local threads = 0
function setup(thread)
  thread:set("tid", threads)
  threads = threads + 1
end
local head = "POST /v1/plans HTTP/1.1\r\nHost: 127.0.0.1\r\n" ..
             "Content-Type: application/json\r\nContent-Length: "
local n = 0
request = function()
  n = n + 1
  local batch = 8 + 2 * (n * 16 + (tid or 0))
  local body = table.concat(pieces, "tensor<" .. batch .. "x1024")
  return head .. #body .. "\r\n\r\n" .. body
end
LUA
spid=${pids[1]}
rss() { awk -v k="$1" '$1 == k":" {printf "%.0f MiB", $2 / 1024}' "/proc/$spid/status"; }

# the user+system CPU so far of the server run() measures, in clock ticks
ticks() { awk '{print $14 + $15}' "/proc/$cpu_pid/stat"; }
hz=$(getconf CLK_TCK)

# run NAME URL [wrk args]: prints one line; sets RPS
run() {
  local name=$1 url=$2; shift 2
  local t0; t0=$(ticks)
  local out; out=$(wrk -t2 -c"$conns" -d"${secs}s" --latency "$@" "$url")
  local t1; t1=$(ticks)
  RPS=$(awk '/^Requests\/sec/ {print $2}' <<<"$out")
  local reqs; reqs=$(awk '/requests in/ {print $1}' <<<"$out")
  local p99; p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
  local non2xx; non2xx=$(awk '/Non-2xx/ {print $NF}' <<<"$out")
  local sockerr; sockerr=$(awk '/Socket errors/ {sub(/^ *Socket errors: */, ""); print}' <<<"$out")
  local cpu; cpu=$(awk -v t=$((t1 - t0)) -v hz="$hz" -v n="$reqs" 'BEGIN {
    if (n > 0 && n == n + 0) printf "%.0f", 1e6 * t / hz / n; else printf "-" }')
  printf '%-36s %8.0f req/s   p99 %8s   server CPU %4s us/req   server RSS %s%s%s\n' "$name" \
    "$RPS" "$p99" "$cpu" "$(rss VmRSS)" "${non2xx:+   non-2xx: $non2xx}" \
    "${sockerr:+   socket errors: $sockerr}"
}
cpu_pid=${pids[0]}
echo "wrk -t2 -c$conns -d${secs}s on 127.0.0.1 (plan id $id, $(nproc) cores); server RSS at start $(rss VmRSS)"
run "minimal libmicrohttpd handler" "http://127.0.0.1:$minport/"; min=$RPS
cpu_pid=$spid
run "GET /v1/plans/$id" "$base/v1/plans/$id"; get=$RPS
run "POST /v1/plans (Flax MLP, stored)" "$base/v1/plans" -s "$tmp/post.lua"; post=$RPS
run "POST /v1/plans (distinct MLP plans)" "$base/v1/plans" -s "$tmp/distinct.lua"; distinct=$RPS
echo "server peak RSS over the runs: $(rss VmHWM)"
awk -v g="$get" -v m="$min" -v p="$post" -v d="$distinct" 'BEGIN {
  printf "GET / minimal: %.0f%% (target >= 50%%): %s\n", 100 * g / m, (g >= 0.5 * m) ? "met" : "NOT met";
  printf "POST MLP: %.0f req/s (target >= 2000): %s\n", p, (p >= 2000) ? "met" : "NOT met";
  printf "POST distinct MLP plans: %.0f req/s (target >= 5000): %s\n", d, (d >= 5000) ? "met" : "NOT met" }'
