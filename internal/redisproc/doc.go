// Package redisproc runs redis-server processes on free loopback ports: a
// plain server, a Redis Cluster (masters with replicas, built with
// redis-cli --cluster create) and a Sentinel deployment (a primary,
// replicas and sentinels). It is the process runner under the test helpers
// of internal/redistest and the benchmark tool's --spawn; it knows nothing
// of package testing.
//
// Every process dies with the process that started it (internal/lifeline:
// Pdeathsig on Linux), so a test that crashes or is killed leaves no
// server behind.
// Waits are bounded polls of the servers' own state (PING, CLUSTER INFO,
// INFO replication, SENTINEL commands), never fixed sleeps; a wait that
// runs out returns an error naming what it waited for, with the tail of
// the servers' logs.
package redisproc
