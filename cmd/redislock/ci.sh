#!/usr/bin/env bash
# CI of the redislock command (its own module): vet, staticcheck, the tests
# with -race and the real-Redis tests mandatory (they build the command and run it against redis-servers they
# start: run, inspect, ACL, TLS), and the demo on an embedded Redis.
# About a minute with a warm build cache.
set -euo pipefail
cd "$(dirname "$0")"
export REDISLOCK_REQUIRE_REDIS=1
go vet ./...
go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
go test -race -count=1 ./...
REDIS_URL= go run . demo >/dev/null
echo "redislock command ci: ok"
