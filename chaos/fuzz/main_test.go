package fuzz

import (
	"flag"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks for leaked goroutines after the seed-corpus run. While
// fuzzing (-test.fuzz), the coordinator stops its worker processes from
// outside, so a leak check at their exit would only report noise.
func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.fuzz"); f != nil && f.Value.String() != "" {
		os.Exit(m.Run())
	}
	goleak.VerifyTestMain(m)
}
