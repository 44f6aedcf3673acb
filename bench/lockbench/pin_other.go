//go:build !linux

package lockbench

import "errors"

// pinCanWork reports whether this platform can pin (Linux).
const pinCanWork = false

func setAffinity(pids []int, cpus []int) error {
	return errors.New("lockbench: --pin needs Linux")
}
