package main

import (
	"fmt"
	"os"
	"strings"
)

func main() {
	os.Exit(Main(os.Args[1:]))
}

// Main runs the command with args and returns its exit code.
func Main(args []string) int {
	cmd := rootCommand()
	cmd.SetArgs(args)
	err := cmd.Execute()
	if err != nil && !isQuiet(err) {
		// The library's errors say "redislock: " already.
		fmt.Fprintln(os.Stderr, "redislock:", strings.TrimPrefix(err.Error(), "redislock: "))
	}
	return codeOf(err)
}
