package lockbench

import (
	"os"
	"runtime"
	"strings"
)

// pin puts the tool (GOMAXPROCS 1) and the servers it spawned on CPU 0,
// every thread of each; the returned func undoes it.
func (t *target) pin() (unpin func(), err error) {
	pids := []int{0}
	for _, p := range t.procs {
		pids = append(pids, p.PID())
	}
	prev := runtime.GOMAXPROCS(1)
	unpin = func() {
		_ = setAffinity(pids, nil)
		runtime.GOMAXPROCS(prev)
	}
	if err := setAffinity(pids, []int{0}); err != nil {
		unpin()
		return nil, err
	}
	return unpin, nil
}

// loadAverage is the system's load average over 1, 5 and 15 minutes, ""
// where the system does not tell it.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
