// Package fuzz holds the fuzz targets of the reliability suite: key, option
// and TTL handling through redislock's public API against miniredis. It is a
// package of its own, with a small dependency graph, so that `go test -fuzz`
// builds quickly (fuzzing instruments every package in the binary).
package fuzz
