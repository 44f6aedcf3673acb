// Command peerbench runs the bench scenarios for redislock and, side by side,
// for bsm/redislock and go-redsync/redsync. Same flags as `go run ./bench`:
//
//	cd bench/peers && go run ./cmd/peerbench --spawn 5
package main

import (
	"os"

	"github.com/redislock-go/redislock/bench/lockbench"
	"github.com/redislock-go/redislock/bench/peers"
)

func main() {
	libs := append(lockbench.Ours(), peers.Libraries()...)
	os.Exit(lockbench.Main("cd bench/peers && go run ./cmd/peerbench", os.Args[1:], libs, os.Stdout, os.Stderr))
}
