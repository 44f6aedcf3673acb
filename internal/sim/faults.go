package sim

import (
	"fmt"
	"time"
)

// Config is one simulation: its size, its length and which of the
// protocol's assumptions it keeps.
type Config struct {
	Nodes    int           // servers (1: single mode)
	Clients  int           // concurrent clients, each a Client of its own
	Keys     int           // lock keys they contend for
	Duration time.Duration // of simulated time for the workload
	MinTTL   time.Duration // lock TTLs are drawn in [MinTTL, MaxTTL]
	MaxTTL   time.Duration

	// Drift bounds the rate error of the nodes' clocks against the
	// clients' (each node draws its own in [-Drift, +Drift], or in
	// [Drift/2, Drift] fast when DriftFast). Within the drift factor
	// (1 % + 2 ms) the invariants hold; beyond it they may not.
	Drift     float64
	DriftFast bool
	// Skew bounds the offset of the clients' wall clocks (quorum fences
	// are proposed from them).
	Skew time.Duration
	// Amnesia drops the operational requirement: node 0 restarts empty
	// at once, again and again, while the others go down now and then
	// keeping their data (within it, empty restarts wait MaxTTL).
	Amnesia bool
	// Step drops the assumption that node clocks do not step: node 0's
	// wall clock jumps forward past the longest TTL, again and again,
	// while the others go down now and then keeping their data (so that
	// some grants miss one of them and rest on a bare majority).
	Step bool
	// Faults is how many network and node faults the schedule draws.
	Faults int
}

// Fault kinds.
const (
	FaultDelay     = "delay"     // the node's links get slow: delays in [Lo, Hi]
	FaultBlackhole = "blackhole" // nothing reaches the node or comes back, For long
	FaultDrop      = "drop"      // replies are lost with chance P, For long
	FaultCut       = "cut"       // the node's connections are closed
	FaultRestart   = "restart"   // the node is down For long, keeping its data
	FaultAmnesia   = "amnesia"   // the node is down For long and comes back empty
	FaultStep      = "step"      // the node's wall clock jumps forward by By
)

// Fault is one event of a schedule.
type Fault struct {
	At     time.Duration // from the start
	Node   int
	Kind   string
	For    time.Duration
	Lo, Hi time.Duration
	P      float64
	By     time.Duration // FaultStep: how far the clock jumps
}

func (f Fault) String() string {
	s := fmt.Sprintf("%v node %d %s", f.At, f.Node, f.Kind)
	switch f.Kind {
	case FaultDelay:
		s += fmt.Sprintf(" %v..%v for %v", f.Lo, f.Hi, f.For)
	case FaultDrop:
		s += fmt.Sprintf(" p=%.2f for %v", f.P, f.For)
	case FaultBlackhole, FaultRestart, FaultAmnesia:
		s += fmt.Sprintf(" for %v", f.For)
	case FaultStep:
		s += fmt.Sprintf(" by %v", f.By)
	}
	return s
}

// Schedule draws the faults of seed for cfg, in time order. Within the
// assumptions, a node that comes back empty stays down at least MaxTTL
// (Redlock's delayed restart); with cfg.Amnesia, node 0 restarts empty at
// once, several times; with cfg.Step, node 0's clock jumps forward past
// the longest TTL, several times.
func Schedule(seed int64, cfg Config) []Fault {
	r := NewRand(seed, 3)
	var fs []Fault
	for range cfg.Faults {
		f := Fault{At: r.Between(0, cfg.Duration), Node: r.Intn(cfg.Nodes)}
		switch k := r.Intn(6); k {
		case 0:
			f.Kind, f.Lo, f.Hi, f.For = FaultDelay, r.Between(0, 5*time.Millisecond), r.Between(5*time.Millisecond, cfg.MaxTTL/2), r.Between(10*time.Millisecond, cfg.MaxTTL*2)
		case 1:
			f.Kind, f.For = FaultBlackhole, r.Between(5*time.Millisecond, cfg.MaxTTL*2)
		case 2:
			f.Kind, f.P, f.For = FaultDrop, 0.1+0.5*r.Float64(), r.Between(10*time.Millisecond, cfg.MaxTTL*2)
		case 3:
			f.Kind = FaultCut
		case 4:
			f.Kind, f.For = FaultRestart, r.Between(time.Millisecond, cfg.MaxTTL)
		case 5:
			f.Kind, f.For = FaultAmnesia, cfg.MaxTTL+r.Between(time.Millisecond, cfg.MaxTTL)
		}
		fs = append(fs, f)
	}
	if cfg.Amnesia {
		// Node 0 restarts empty at once, again and again; the other nodes
		// go down for a while now and then (keeping their data), so that
		// some grants miss one of them: those are the grants a restart of
		// node 0 leaves without a majority.
		for range 6 + r.Intn(6) {
			fs = append(fs, Fault{At: r.Between(0, cfg.Duration), Node: 0, Kind: FaultAmnesia, For: r.Between(0, 2*time.Millisecond)})
		}
		for range 3 + r.Intn(4) {
			fs = append(fs, Fault{At: r.Between(0, cfg.Duration), Node: 1 + r.Intn(max(1, cfg.Nodes-1)), Kind: FaultRestart, For: r.Between(cfg.MinTTL/2, cfg.MaxTTL)})
		}
	}
	if cfg.Step {
		// As with Amnesia: node 0's clock jumps (its keys expire at once),
		// the other nodes go down for a while now and then.
		s := NewRand(seed, 5)
		for range 6 + s.Intn(6) {
			fs = append(fs, Fault{At: s.Between(0, cfg.Duration), Node: 0, Kind: FaultStep, By: cfg.MaxTTL + s.Between(0, cfg.MaxTTL)})
		}
		for range 3 + s.Intn(4) {
			fs = append(fs, Fault{At: s.Between(0, cfg.Duration), Node: 1 + s.Intn(max(1, cfg.Nodes-1)), Kind: FaultRestart, For: s.Between(cfg.MinTTL/2, cfg.MaxTTL)})
		}
	}
	sortFaults(fs)
	return fs
}

func sortFaults(fs []Fault) {
	for i := 1; i < len(fs); i++ {
		for j := i; j > 0 && fs[j].At < fs[j-1].At; j-- {
			fs[j], fs[j-1] = fs[j-1], fs[j]
		}
	}
}
