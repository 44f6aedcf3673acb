#!/usr/bin/env bash
# CI of the metric and trace adapters (extra/redislockprom,
# extra/redislockotel; each its own module) and of the dashboard and alert
# rules (extra/redislockprom/monitoring, a module for their check): vet,
# staticcheck, and the tests with -race and the real-Redis tests mandatory
# (.ci/oldest-go builds them with the oldest Go they name). Seconds with a
# warm build cache.
set -euo pipefail
cd "$(dirname "$0")"
export REDISLOCK_REQUIRE_REDIS=1
check() {
	echo "-- extra/$1"
	go -C "$1" vet ./...
	go -C "$1" run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
	go -C "$1" test -race -count=1 ./...
}
check redislockprom
check redislockotel
# Outside the workspace (see its go.mod).
GOWORK=off check redislockprom/monitoring
echo "extra ci: ok"
