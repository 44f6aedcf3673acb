package sim

// Run is one simulation of a seed with a schedule; it returns the
// history it made.
type Run func(cfg Config, faults []Fault) *History

// Shrink looks for a smaller run that still breaks invariant inv: fewer
// clients, a shorter workload, fewer faults (each tried without, one at a
// time), at most budget runs. It returns the smallest it found.
func Shrink(run Run, cfg Config, faults []Fault, inv string, budget int) (Config, []Fault, *History) {
	fails := func(c Config, fs []Fault) *History {
		if budget <= 0 {
			return nil
		}
		budget--
		h := run(c, fs)
		for _, v := range h.Violations() {
			if v.Invariant == inv {
				return h
			}
		}
		return nil
	}
	best := run(cfg, faults)
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
			kept := faults[:0:0]
			for _, f := range faults {
				if f.At <= c.Duration {
					kept = append(kept, f)
				}
			}
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
