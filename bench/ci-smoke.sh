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

go -C bench build -o "$out/lockbench" .

echo "ci-smoke: redislock, single node (go -C bench run .)"
"$out/lockbench" --spawn 1 --scenarios uncontended,hotkey,renew --libs redislock --pin "${quick[@]}" \
	--json-out "$out/bench.json" --svg "$out/bench.svg" --html "$out/bench.html"
grep -q '"ops_per_sec"' "$out/bench.json"
grep -q '</svg>' "$out/bench.svg"

echo "ci-smoke: redislock, quorum of 3"
"$out/lockbench" --spawn 3 --scenarios quorum --libs redislock "${quick[@]}"

echo "ci-smoke: redislock, quorum of 5 with one node blackholed"
"$out/lockbench" --spawn 5 --scenarios quorum-blackhole --libs redislock "${quick[@]}"

echo "ci-smoke: cache stampede (the stampede package and the hand-rolled pattern)"
"$out/lockbench" --spawn 1 --scenarios stampede --libs redislock/linear "${quick[@]}" --stampede-fill 20ms

echo "ci-smoke: redislock vs peers"
"$out/lockbench" --spawn 3 "${quick[@]}" \
	--scenarios uncontended,hotkey,quorum --libs redislock/linear,bsm/linear,redsync/1ms,rueidislock/km1

# Servers the tool spawned run in a lockbench-redis-* temp dir.
for pid in $(pgrep -x redis-server || true); do
	if [[ "$(readlink "/proc/$pid/cwd" 2>/dev/null || true)" == *lockbench-redis-* ]]; then
		echo "ci-smoke: redis-server $pid left behind" >&2
		exit 1
	fi
done
echo "ci-smoke: ok"
