// Command bench measures redislock: uncontended and hot-key throughput,
// hand-off latency, fairness, Redis commands per grant, quorum mode and the
// cost of auto-renewal. Run `go run ./bench -h` for flags; see README.md.
//
// The same scenarios against other Go lock libraries run from the separate
// module in ./peers (`cd bench/peers && go run .`).
package main

import (
	"os"

	"github.com/redislock-go/redislock/bench/lockbench"
)

func main() {
	os.Exit(lockbench.Main("go run ./bench", os.Args[1:], lockbench.Ours(), os.Stdout, os.Stderr))
}
