#!/usr/bin/env bash
# CI smoke test of the benchmark tool: a few seconds against redis-server
# processes the tool starts itself on free loopback ports. It checks that
# every scenario runs, makes progress, and has no errors or lost locks; it
# does not judge the numbers. Exits non-zero on failure.
set -euo pipefail

cd "$(dirname "$0")/.."
command -v redis-server >/dev/null || { echo "ci-smoke: redis-server not on PATH" >&2; exit 1; }

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

quick=(--duration 250ms --warmup 50ms --reps 1 --workers 1,8 --hot-workers 4
	--quorum-sizes 3 --renew-locks 20 --renew-ttl 150ms --strict)

go build -o "$out/lockbench" ./bench

echo "ci-smoke: redislock, single node (go run ./bench)"
"$out/lockbench" --spawn 1 --scenarios uncontended,hotkey,renew "${quick[@]}" \
	--json-out "$out/bench.json" --svg "$out/bench.svg" --html "$out/bench.html"
grep -q '"ops_per_sec"' "$out/bench.json"
grep -q '</svg>' "$out/bench.svg"

echo "ci-smoke: redislock, quorum of 3"
"$out/lockbench" --spawn 3 --scenarios quorum "${quick[@]}"

echo "ci-smoke: redislock vs peers (bench/peers)"
if (cd bench/peers && go mod download && go build ./...) 2>"$out/peers.err"; then
	(cd bench/peers && go run ./cmd/peerbench --spawn 3 "${quick[@]}" \
		--scenarios uncontended,hotkey,quorum --libs redislock/linear,bsm/linear,redsync/1ms)
else
	echo "ci-smoke: bench/peers does not build here (offline?), skipped:" >&2
	cat "$out/peers.err" >&2
fi

# Servers the tool spawned run in a lockbench-redis-* temp dir.
for pid in $(pgrep -x redis-server || true); do
	if [[ "$(readlink "/proc/$pid/cwd" 2>/dev/null || true)" == *lockbench-redis-* ]]; then
		echo "ci-smoke: redis-server $pid left behind" >&2
		exit 1
	fi
done
echo "ci-smoke: ok"
