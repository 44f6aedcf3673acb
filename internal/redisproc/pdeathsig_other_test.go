//go:build !linux

package redisproc

const helperEnv = "REDISPROC_HELPER"

func helperProcess() {}
