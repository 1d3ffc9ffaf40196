#!/usr/bin/env bash
# A second CI runner's cold build with a warm remote cache, against the same cold build without
# one (issue 34's bar: at least 5x faster, no NVRTC call). Starts its own Redis on 127.0.0.1:PORT
# (default 6395, no persistence), and per round: a cold build without a remote (the baseline), a
# cold build that fills the store (first runner), and a cold build with an empty local cache
# against the warm store (second runner). Prints each build's wall time and its cache statistics.
#
# Usage (from the repository root, with NVRTC loadable, e.g. LD_LIBRARY_PATH naming pip's
# nvidia/cu13/lib): bench/remote_cache.sh TILEC CORPUS [ROUNDS] [PORT]
set -euo pipefail
tilec=$1 corpus=$2 rounds=${3:-3} port=${4:-6395}
work=$(mktemp -d)
redis-server --bind 127.0.0.1 --port "$port" --save "" --appendonly no --daemonize yes \
    --pidfile "$work/redis.pid" --dir "$work" --logfile "$work/redis.log"
trap 'kill "$(cat "$work/redis.pid")" 2>/dev/null || true; rm -rf "$work"' EXIT
until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.1; done
export CUDA_CACHE_DISABLE=1 # ptxas really runs in every compilation, as on a fresh runner

# One build: its wall time in ms and the summary's cache object.
build() {
    local label=$1 cache=$2 remote=$3
    local start end
    start=$(date +%s%N)
    TILEC_CACHE_REMOTE=$remote "$tilec" build "$corpus" --out "$work/out-$cache" \
        --cache "$work/$cache" --format json >"$work/$cache.json" 2>"$work/$cache.err" || true
    end=$(date +%s%N)
    printf '%-28s %8.1f ms  %s\n' "$label" "$(((end - start) / 1000))e-3" \
        "$(tail -n 1 "$work/$cache.json" | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["cache"]))')"
}

for round in $(seq "$rounds"); do
    redis-cli -p "$port" flushall >/dev/null
    build "round $round: no remote" "base$round" ""
    build "round $round: first runner" "one$round" "redis://127.0.0.1:$port/0"
    build "round $round: second runner" "two$round" "redis://127.0.0.1:$port/0"
done
