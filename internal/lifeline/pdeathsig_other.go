//go:build !linux

package lifeline

import (
	"errors"
	"os/exec"
)

// setPdeathsig does nothing: only Linux has a parent-death signal.
func setPdeathsig(*exec.Cmd) {}

// canWatch is false: a pipe cannot be made to signal its end here.
const canWatch = false

// waitExited does not wait: only Linux needs the forking thread kept.
func waitExited(int) bool { return false }

func arm(int) error { return errors.New("not supported on this system") }
