// Command bench measures redislock beside the other Go lock libraries:
// uncontended and hot-key throughput, hand-off latency, fairness, Redis
// commands per grant, quorum mode and the cost of auto-renewal.
//
// Anywhere, with Go 1.25 or later (no clone needed):
//
//	go run github.com/redislock-go/redislock/bench@latest -h
//
// In a clone of the repository, from its root (the tool as the work tree
// has it):
//
//	go -C bench run . -h
//
// See README.md.
package main

import (
	"os"
	"runtime/debug"

	"github.com/redislock-go/redislock/bench/lockbench"
	"github.com/redislock-go/redislock/bench/peers"
)

// The two ways to run the tool, without its flags.
const (
	modulePath = "github.com/redislock-go/redislock/bench"
	inClone    = "go -C bench run ."
)

func main() {
	libs := append(append(lockbench.Ours(), peers.Libraries()...), lockbench.Postgres()...)
	bi, _ := debug.ReadBuildInfo()
	os.Exit(lockbench.Main(invocation(bi), os.Args[1:], libs, os.Stdout, os.Stderr))
}

// invocation is how the build described by bi is run again, and the usage
// line's ways to run the tool. A build from the module cache (go run
// .../bench@VERSION, go install) has a checksum: it is run again by its
// module path and version. Any other (go -C bench run . in a clone, whose
// version is "(devel)" or one derived from the clone's VCS) is run again
// from the clone.
func invocation(bi *debug.BuildInfo) lockbench.Invocation {
	inv := lockbench.Invocation{
		Command: inClone,
		Forms:   []string{"go run " + modulePath + "@latest", inClone},
		Note:    "(the first anywhere, @latest or a version such as @v0.1.0; the second in a clone of the repository, from its root)",
	}
	if bi != nil && bi.Main.Sum != "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		inv.Command = "go run " + modulePath + "@" + bi.Main.Version
	}
	return inv
}
