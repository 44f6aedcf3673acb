package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// quiet is an exit that has nothing more to say (the command's own exit
// code, already reported).
var errQuiet = errors.New("")

func isQuiet(err error) bool { return errors.Is(err, errQuiet) }

func rootCommand() *cobra.Command {
	var c conn
	root := &cobra.Command{
		Use:   "redislock",
		Short: "Distributed locks on Redis, from the shell",
		Long: `redislock takes locks on Redis for shell scripts, cron jobs and one-off tasks
that must not run twice at once, across hosts: the locks of the Go library
github.com/redislock-go/redislock, with fencing tokens and renewal.

  redislock run nightly-report -- ./report.sh     run a command under a lock
  redislock inspect nightly-report                 who holds it, for how long
  redislock demo                                   see it work (no Redis needed)

The Redis is --addr or $REDIS_URL (redis://user:password@host:6379/0, rediss://
for TLS), --quorum for a lock on a majority of independent masters, or
--sentinel.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		CompletionOptions: cobra.CompletionOptions{
			HiddenDefaultCmd: true,
		},
	}
	root.Args = func(_ *cobra.Command, args []string) error {
		if len(args) > 0 {
			return usageError("unknown command %q (see redislock --help)", args[0])
		}
		return nil
	}
	// --version, with flock's -V (-v is run's --verbose). Not cobra's
	// Version: its template is a text/template, whose reflection keeps
	// every method of go-redis' clients in the binary (27 MB instead of 16).
	root.Flags().BoolP("version", "V", false, "print the version of redislock (module, commit, Go) and exit")
	root.RunE = func(cmd *cobra.Command, _ []string) error {
		if v, _ := cmd.Flags().GetBool("version"); v {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), version())
			return err
		}
		return cmd.Help()
	}
	c.bind(root.PersistentFlags())
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		if errors.Is(err, pflag.ErrHelp) {
			return err
		}
		return exitWith(exitUsage, err)
	})
	root.AddCommand(runCommand(&c), inspectCommand(&c), demoCommand(&c))
	return root
}
