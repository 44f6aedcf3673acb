// Command bench measures redislock beside the other Go lock libraries:
// uncontended and hot-key throughput, hand-off latency, fairness, Redis
// commands per grant, quorum mode and the cost of auto-renewal. From the
// repository root: `go -C bench run . -h` for flags; see README.md.
package main

import (
	"os"

	"github.com/redislock-go/redislock/bench/lockbench"
	"github.com/redislock-go/redislock/bench/peers"
)

func main() {
	libs := append(append(lockbench.Ours(), peers.Libraries()...), lockbench.Postgres()...)
	os.Exit(lockbench.Main("go -C bench run .", os.Args[1:], libs, os.Stdout, os.Stderr))
}
