#!/usr/bin/env bash
# CI of the PostgreSQL backend: make sure the local PostgreSQL is up
# (127.0.0.1:5432, database "test", trust auth for "postgres"; the tests
# create and drop their own schemas) and pgbouncer is installed (the tests
# start their own on a free port), then vet, staticcheck and the tests with
# -race, with the PostgreSQL and PgBouncer tests mandatory, and a smoke of
# the bench tool on PostgreSQL. Exits non-zero on failure.
set -euo pipefail
cd "$(dirname "$0")"

dsn=${REDISLOCK_POSTGRES_DSN:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}
export REDISLOCK_POSTGRES_DSN=$dsn

up() { pg_isready -q -d "$dsn" 2>/dev/null; }
if ! up; then
	if command -v pg_ctlcluster >/dev/null && [ -d /etc/postgresql ]; then
		echo "pglock ci: starting PostgreSQL"
		pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start || true
	fi
	for _ in $(seq 1 30); do up && break; sleep 1; done
fi
if ! up; then
	echo "pglock ci: no PostgreSQL answers at $dsn" >&2
	exit 1
fi

# PgBouncer (transaction pooling) for the tests behind a pooler.
if ! command -v pgbouncer >/dev/null && [ ! -x /usr/sbin/pgbouncer ]; then
	echo "pglock ci: installing pgbouncer"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer >/dev/null
fi
export REDISLOCK_REQUIRE_PGBOUNCER=1

go vet ./...
go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
REDISLOCK_REQUIRE_POSTGRES=1 go test -race -count=1 ./...

# A short smoke of the bench tool on PostgreSQL (seconds). Renewals are
# durable commits: 1 s leases, as the README advises (shorter ones run out
# behind WAL flushes on a slow disk).
go -C ../bench run . --backend postgres --scenarios uncontended,hotkey,renew \
	--duration 250ms --warmup 50ms --reps 1 --workers 1,8 --hot-workers 4 \
	--renew-locks 20 --renew-ttl 1s --strict >/dev/null
echo "pglock ci: ok"
