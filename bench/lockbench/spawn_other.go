//go:build !linux

package lockbench

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
