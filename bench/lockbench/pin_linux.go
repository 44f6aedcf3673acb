package lockbench

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// pinCanWork reports whether this platform can pin (Linux).
const pinCanWork = true

// setAffinity sets the CPU affinity of every thread of the processes pids
// (0: this process) to cpus, or to the tool's own affinity at start when
// cpus is nil.
func setAffinity(pids []int, cpus []int) error {
	set := startCPUs
	if cpus != nil {
		set.Zero()
		for _, c := range cpus {
			set.Set(c)
		}
	}
	for _, pid := range pids {
		dir := "/proc/self/task"
		if pid != 0 {
			dir = "/proc/" + strconv.Itoa(pid) + "/task"
		}
		tasks, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			if err := unix.SchedSetaffinity(tid, &set); err != nil && err != unix.ESRCH {
				return err
			}
		}
	}
	return nil
}

// startCPUs is the tool's affinity at start: what unpinning restores.
var startCPUs = func() unix.CPUSet {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		for c := range 1024 {
			set.Set(c)
		}
	}
	return set
}()
