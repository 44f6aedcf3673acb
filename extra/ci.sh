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
for m in redislockprom redislockotel redislockprom/monitoring; do
	echo "-- extra/$m"
	go -C "$m" vet ./...
	go -C "$m" run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
	go -C "$m" test -race -count=1 ./...
done
echo "extra ci: ok"
