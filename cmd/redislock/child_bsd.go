//go:build unix && !linux

package main

import "syscall"

func dieWithRedislock(*syscall.SysProcAttr) {}

func becomeSubreaper() {}
