package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/redislock-go/redislock/bench/lockbench"
	"github.com/redislock-go/redislock/bench/peers"
)

func benchCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "bench [bench flags]",
		Short: "Measure lock throughput and latency (the bench tool)",
		Long: `Run the benchmark tool of the repository (bench/, also "go -C bench run ."):
uncontended and hot-key throughput, hand-off latency, fairness, Redis calls
per grant, quorum mode and auto-renewal, for redislock, the other Go lock
libraries and the PostgreSQL backend. By default it starts its own redis-server processes on free
loopback ports; --addr and --quorum point it at a Redis of yours, whose data
it FLUSHALLs. On a terminal it shows its progress.

Its flags are its own: "redislock bench -h" lists them. The connection flags
of redislock do not apply.`,
		Example: `  redislock bench --scenarios uncontended,hotkey --libs redislock --duration 1s --reps 1
  redislock bench --json-out results.json --md results.md`,
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			libs := append(append(lockbench.Ours(), peers.Libraries()...), lockbench.Postgres()...)
			if code := lockbench.Main("redislock bench", args, libs, os.Stdout, os.Stderr); code != 0 {
				return exitWith(code, errQuiet)
			}
			return nil
		},
	}
}
