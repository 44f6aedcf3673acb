//go:build !linux

package main_test

import "os/exec"

// dieWithTest does nothing: only Linux has a parent-death signal.
func dieWithTest(*exec.Cmd) {}
