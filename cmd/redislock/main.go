package main

import (
	"fmt"
	"os"
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
		fmt.Fprintln(os.Stderr, "redislock:", err)
	}
	return codeOf(err)
}
