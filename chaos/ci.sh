#!/usr/bin/env bash
# Reliability suite of redislock: fault tests against real redis-server
# processes, the checkers, the leak soak, and a short fuzz run.
#
# Run from anywhere (the repo root or chaos/): the script changes into its own
# directory. Needs go and redis-server on PATH; REDISLOCK_REQUIRE_REDIS=1
# turns a missing redis-server into a failure instead of a skip.
#
# Budget (2 cores, warm build cache): about one minute (50-70 s measured);
# hard bounds: vet 120 s, tests 240 s (go test -timeout 200s), fuzz
# 2 x 180 s (a fixed number of inputs each, a few seconds). A cold build cache adds the compile time
# of the module and of the fuzz-instrumented chaos/fuzz package.
#
# Writes the run's figures to $CHAOS_OUT/summary.txt (default: a temp dir,
# printed at the end) and porcupine visualizations of failing histories to
# $CHAOS_OUT/artifacts.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")"
export REDISLOCK_REQUIRE_REDIS=1

# Every redis-server the tests start lives in a temp dir under $TMPDIR; a
# test binary that dies (panic, timeout) cannot run its clean-ups, so the
# script kills, by PID, any redis-server whose working directory is there.
work=$(mktemp -d /tmp/chaos-ci.XXXXXX)
export TMPDIR="$work/tmp"
mkdir -p "$TMPDIR"
CHAOS_OUT=${CHAOS_OUT:-$work/out}
mkdir -p "$CHAOS_OUT/artifacts"
export CHAOS_SUMMARY="$CHAOS_OUT/summary.txt" CHAOS_ARTIFACTS="$CHAOS_OUT/artifacts"

reap() {
	local pid cwd
	for pid in $(pgrep -x redis-server || true); do
		cwd=$(readlink "/proc/$pid/cwd" 2>/dev/null || true)
		if [[ $cwd == "$TMPDIR"/* ]]; then
			kill -CONT "$pid" 2>/dev/null || true
			kill -KILL "$pid" 2>/dev/null || true
		fi
	done
}
cleanup() {
	reap
	rm -rf "$TMPDIR"
}
trap cleanup EXIT

echo "== chaos: gofmt, go vet"
unformatted=$(gofmt -l .)
if [[ -n $unformatted ]]; then
	echo "gofmt needed:"
	echo "$unformatted"
	exit 1
fi
timeout 120 go vet ./...

echo "== chaos: fault tests, checkers, error classification, soak (-race)"
# The filters must not fail the pipeline (grep exits 1 when it selects no
# line): only go test's (or timeout's) status decides, with a message.
if ! timeout 240 go test -race -count=1 -timeout 200s -v ./... 2>&1 | tee "$CHAOS_OUT/test.log" |
	{ grep -E '^(--- |ok|FAIL|PASS|CHAOS-|panic)|KNOWN CORE BUG' || true; }; then
	echo "chaos tests failed or timed out (full log: $CHAOS_OUT/test.log)"
	exit 1
fi

# A count, not a duration: with a duration, Go 1.26's fuzz coordinator can
# fail a target with a bare "context deadline exceeded" when the time is up
# (golang/go#75804, fixed in Go 1.27); a count has no deadline to race.
# Counts sized to a few seconds each (FuzzRetryOptions runs three Obtain
# calls of up to 20 ms per input).
echo "== chaos: fuzz (a few seconds per target)"
for spec in FuzzObtainInput:10000 FuzzRetryOptions:300; do
	target=${spec%%:*}
	log="$CHAOS_OUT/fuzz-$target.log"
	if ! timeout 180 go test -run '^$' -fuzz "^${target}\$" -fuzztime "${spec##*:}x" -parallel 2 ./fuzz >"$log" 2>&1; then
		# An empty log (the build or timeout died first) must not end the
		# script silently under set -e: grep selecting no line exits 1.
		{ grep -v '^fuzz: elapsed' "$log" || true; } | tail -n 80
		[[ -s $log ]] || echo "fuzz $target: its log is empty (killed by timeout 180, or go test died before writing)"
		echo "fuzz $target failed (full log: $log; a crasher is saved under fuzz/testdata/fuzz/$target)"
		exit 1
	fi
	tail -n 3 "$log"
done

sleep 1 # a killed AOF server's rewrite child exits on its own
left=""
for pid in $(pgrep -x redis-server || true); do
	if [[ $(readlink "/proc/$pid/cwd" 2>/dev/null || true) == "$TMPDIR"/* ]]; then
		left+=" $pid"
	fi
done
if [[ -n $left ]]; then
	echo "redis-server processes left behind by the tests:$left (killed)"
	exit 1 # the trap reaps them
fi
echo "== chaos: figures ($CHAOS_SUMMARY)"
cat "$CHAOS_SUMMARY" 2>/dev/null || echo "(no figures: the tests wrote no $CHAOS_SUMMARY)"
