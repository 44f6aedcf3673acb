package sim

import "time"

// Run is one simulation of a seed with a schedule; it returns the
// history it made.
type Run func(cfg Config, faults []Fault) *History

// Shrink looks for a smaller run than the one that made best and broke
// invariant inv: fewer clients, a shorter workload, fewer faults (each
// tried without, one at a time), at most budget runs. It returns the
// smallest it found and its history. A run of a seed does not always
// replay alike (the order of goroutines ready at one instant is the Go
// scheduler's), so a candidate counts only when its own run broke inv; it
// gets three runs to do so.
func Shrink(run Run, cfg Config, faults []Fault, inv string, budget int, best *History) (Config, []Fault, *History) {
	fails := func(c Config, fs []Fault) *History {
		for range 3 { // a candidate gets three runs: runs need not replay alike
			if budget <= 0 {
				return nil
			}
			budget--
			if h := run(c, fs); h.Broke(inv) {
				return h
			}
		}
		return nil
	}
	// First cut the run short at the violation: the workload starts
	// nothing after it, and the faults after it are dropped.
	if at, ok := best.Found(inv); ok && at < cfg.Duration {
		c := cfg
		c.Duration = at.Truncate(time.Millisecond) + time.Millisecond
		if h := fails(c, faultsUpTo(faults, c.Duration)); h != nil {
			cfg, faults, best = c, faultsUpTo(faults, c.Duration), h
		}
	}
	for progress := true; progress && budget > 0; {
		progress = false
		for cfg.Clients > 2 {
			c := cfg
			c.Clients--
			h := fails(c, faults)
			if h == nil {
				break
			}
			cfg, best, progress = c, h, true
		}
		for cfg.Duration > cfg.MaxTTL {
			c := cfg
			c.Duration /= 2
			kept := faultsUpTo(faults, c.Duration)
			h := fails(c, kept)
			if h == nil {
				break
			}
			cfg, faults, best, progress = c, kept, h, true
		}
		for i := 0; i < len(faults); {
			fs := append(append([]Fault(nil), faults[:i]...), faults[i+1:]...)
			if h := fails(cfg, fs); h != nil {
				faults, best, progress = fs, h, true
				continue
			}
			i++
		}
	}
	return cfg, faults, best
}

// faultsUpTo returns the faults that begin by d.
func faultsUpTo(faults []Fault, d time.Duration) []Fault {
	var kept []Fault
	for _, f := range faults {
		if f.At <= d {
			kept = append(kept, f)
		}
	}
	return kept
}
