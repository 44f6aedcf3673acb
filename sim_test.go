package redislock_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redislock-go/redislock/internal/proctest"
	"github.com/redislock-go/redislock/internal/sim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// The simulation (internal/sim): clients of this library on miniredis
// nodes that run its scripts, through a simulated network, on clocks of
// their own, all inside a synctest bubble, every choice drawn from one
// seed. Rerun a seed: go test -run 'TestSim$/safe' -sim.seed=N
// -sim.seeds=1 -sim.show -v. A longer run: go test -run 'TestSim$'
// -sim.seeds=100000. The searches (TestSimAssumptions, TestSimMutations)
// run with a budget of seeds: go test -run TestSim -sim.budget=2000 (CI's
// sim step).
var (
	simSeeds  = flag.Int("sim.seeds", 20, "simulation: seeds TestSim runs per mode")
	simBudget = flag.Int("sim.budget", 0, "simulation: seeds a search for a predicted violation may use (0: the searches are skipped)")
	simFirst  = flag.Int64("sim.seed", 1, "simulation: the first seed")
	simShow   = flag.Bool("sim.show", false, "simulation: print each seed's history")
	simMode   = flag.String("sim.mode", "safe", "simulation: the child's mode (set by the tests)")
	simProcs  = flag.Int("sim.procs", 0, "simulation: processes to spread the seeds over (0: GOMAXPROCS, at most 4)")
	simReplay = flag.Bool("sim.replay", false, "simulation: run each seed twice and count the seeds whose histories agree (TestSim)")
)

// simChildEnv marks the process a sim test re-executes itself in: the
// library pools timers and channels (sync.Pool), which must never cross
// between a synctest bubble and the outside, so all of a process's seeds
// run in one bubble, in a process that runs nothing else.
const simChildEnv = "REDISLOCK_SIM_CHILD"

// simConfig is the simulation within the protocol's assumptions: three
// nodes, clock rates within the drift factor and no clock steps, skews far
// below a record's life, nodes that come back empty only after the longest
// TTL.
func simConfig() sim.Config {
	return sim.Config{Nodes: 3, Clients: 3, Keys: 1, Duration: time.Second,
		MinTTL: 100 * time.Millisecond, MaxTTL: 400 * time.Millisecond,
		Drift: 0.008, Skew: 20 * time.Millisecond, Faults: 6}
}

// simModeSpec is one way of running the simulation: its config, the
// invariant it must find broken ("" for none: every seed must pass), and
// the broken world it runs in (sim_mutate_test.go; "" for none).
type simModeSpec struct {
	cfg    func() sim.Config
	expect string
	mutate string
}

var simModes = map[string]simModeSpec{
	"safe":   {cfg: simConfig},
	"single": {cfg: func() sim.Config { c := simConfig(); c.Nodes = 1; return c }},
	// One node of three restarts empty at once: a second majority can
	// grant the lock (README: the operational requirement). Five clients
	// for 2 s: a grant exposed to it rests on a bare majority, and
	// refreshes widen grants to every node, so it takes contention (nodes
	// that went to a contender) and nodes down to find one (a run of 2,000
	// seeds from 1, 1000, 3000, 5000, 7000, 9000 found it within 10 to 456,
	// runs of one seed differing in the scheduler's order).
	"amnesia": {cfg: func() sim.Config {
		c := simConfig()
		c.Amnesia, c.Clients, c.Duration = true, 5, 2*time.Second
		return c
	}, expect: sim.InvExclusion},
	// One node's clock of three jumps forward past the TTL: a grant that
	// rests on a bare majority (the third node was down, slow, or went to
	// a contender, and no refresh has brought it in yet) is left on a
	// minority, and a second majority can grant the lock (README: one
	// node's clock step).
	"step": {cfg: func() sim.Config { c := simConfig(); c.Step = true; return c }, expect: sim.InvExclusion},
	// The nodes' clocks run 4-8 % fast against the clients', beyond the
	// drift factor: keys expire before the validity the clients were
	// given, and another client is granted the lock meanwhile.
	"drift": {cfg: func() sim.Config { c := simConfig(); c.Drift, c.DriftFast = 0.08, true; return c }, expect: sim.InvExclusion},
}

// simRegressions are seeds that found a bug once, run by every TestSim
// (each fails on every run without its fix). A change to the workload or
// to the schedule's draws may make one play something else: it then stays
// one more seed.
var simRegressions = []struct {
	mode string
	seed int64
}{
	// A Refresh counted a node whose obtain had answered after the node
	// timeout and whose release was on its way: when it landed, no
	// majority held the lock. (A held lock now keeps such a node and
	// releases nothing behind its holder's back: quorum_grant.go.)
	{"safe", 2623},
}

// TestSim runs the seeds within the assumptions, in quorum mode and in
// single mode, and the regression seeds; every invariant must hold on
// every step of every seed.
func TestSim(t *testing.T) {
	var extra []string
	if *simReplay {
		extra = append(extra, "-sim.replay")
	}
	for _, mode := range []string{"safe", "single"} {
		t.Run(mode, func(t *testing.T) { simParentArgs(t, mode, *simFirst, *simSeeds, extra...) })
	}
	t.Run("regressions", func(t *testing.T) {
		for _, r := range simRegressions {
			simParentArgs(t, r.mode, r.seed, 1, extra...)
		}
	})
}

// TestSimAssumptions drops one assumption at a time: the simulation must
// find the violation the README predicts, within -sim.budget seeds, and
// print the smallest history it shrank it to.
func TestSimAssumptions(t *testing.T) {
	for _, mode := range []string{"amnesia", "drift", "step"} {
		t.Run(mode, func(t *testing.T) { simParent(t, mode, *simFirst, *simBudget) })
	}
}

// simParent runs seeds [first, first+n) of mode in child processes.
func simParent(t *testing.T, mode string, first int64, n int) {
	simParentArgs(t, mode, first, n)
}

func simParentArgs(t *testing.T, mode string, first int64, n int, extra ...string) {
	if os.Getenv(simChildEnv) != "" {
		t.Skip("in a simulation child")
	}
	spec := simModes[mode]
	if spec.expect != "" && n <= 0 {
		t.Skip("a search: run with -sim.budget=N (go test -run TestSim -sim.budget=2000)")
	}
	procs := *simProcs
	if procs <= 0 {
		procs = min(runtime.GOMAXPROCS(0), 4)
	}
	procs = max(1, min(procs, n))
	// The seeds go out in chunks, in ascending order, to procs children
	// at a time; a search starts no chunk above one that found it.
	per := (n + procs - 1) / procs
	if spec.expect != "" {
		per = min(per, 100)
	}
	type result struct {
		lo    int64
		out   string
		err   error
		found int64 // the seed a search found its violation at, 0: none
	}
	var (
		mu      sync.Mutex
		next    = first
		lowest  int64 // the lowest chunk that found it, 0: none yet
		rs      []result
		workers sync.WaitGroup
	)
	take := func() (int64, int, bool) {
		mu.Lock()
		defer mu.Unlock()
		lo := next
		if lo >= first+int64(n) || lowest != 0 {
			return 0, 0, false
		}
		next += int64(per)
		return lo, min(per, int(first+int64(n)-lo)), true
	}
	for range procs {
		workers.Go(func() {
			for lo, cnt, ok := take(); ok; lo, cnt, ok = take() {
				args := append([]string{"-test.run=^TestSimChild$", "-test.v",
					"-sim.mode=" + mode, fmt.Sprintf("-sim.seed=%d", lo), fmt.Sprintf("-sim.seeds=%d", cnt),
					fmt.Sprintf("-sim.show=%v", *simShow)}, extra...)
				cmd := exec.Command(os.Args[0], args...)
				// miniredis makes a Lua state per script call: garbage, most of
				// it short-lived (GOGC=1600: 15 % less CPU than 400, 150 MB).
				cmd.Env = append(os.Environ(), simChildEnv+"=1", "GOGC=1600")
				// A child dies with this test, however it ends (it once ran on,
				// orphaned, for 20 minutes after its parent failed).
				out, err := proctest.CombinedOutput(t, cmd)
				r := result{lo: lo, out: string(out), err: err}
				for _, line := range strings.Split(r.out, "\n") {
					if s, ok := strings.CutPrefix(strings.TrimSpace(line), "simfound "); ok {
						r.found, _ = strconv.ParseInt(s, 10, 64)
					}
				}
				mu.Lock()
				rs = append(rs, r)
				if r.found != 0 && (lowest == 0 || lo < lowest) {
					lowest = lo
				}
				mu.Unlock()
			}
		})
	}
	workers.Wait()
	sort.Slice(rs, func(i, j int) bool { return rs[i].lo < rs[j].lo })
	var found *result // the lowest seed that found it
	for i := range rs {
		if rs[i].found != 0 && (found == nil || rs[i].found < found.found) {
			found = &rs[i]
		}
	}
	for _, r := range rs {
		if spec.expect != "" && found != nil && r.lo != found.lo {
			continue // another child's search; the lowest seed's is the result
		}
		for _, line := range strings.Split(r.out, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "sim") || strings.Contains(line, "ms ") || r.err != nil && spec.expect == "" {
				t.Log(line)
			}
		}
		assert.False(t, r.err != nil && spec.expect == "", "simulation child (seeds from %d): %v", r.lo, r.err)
	}
	assert.False(t, spec.expect != "" && found == nil, "sim %s: %q not found in seeds %d..%d", mode, spec.expect, first, first+int64(n)-1)
}

// TestSimChild is the child: all its seeds in one bubble.
func TestSimChild(t *testing.T) {
	if os.Getenv(simChildEnv) == "" {
		t.Skip("run by the sim tests in a process of its own")
	}
	spec, ok := simModes[*simMode]
	require.True(t, ok, "unknown -sim.mode %q", *simMode)
	cfg := spec.cfg()
	redis.SetLogger(quietLogger{}) // dial failures are the faults at work
	synctest.Test(t, func(t *testing.T) {
		// go-redis probes a node it failed to dial once a second until its
		// pool is closed: let the last probes end before the bubble does.
		defer pass(2 * time.Second)
		run := func(seed int64, c sim.Config, fs []sim.Fault) *sim.History {
			return runSeed(seed, c, fs, spec.mutate)
		}
		grants, events, steps, replayed := 0, 0, 0, 0
		for seed := *simFirst; seed < *simFirst+int64(*simSeeds); seed++ {
			faults := sim.Schedule(seed, cfg)
			h := run(seed, cfg, faults)
			grants, events, steps = grants+h.Grants(), events+h.Events(), steps+h.Steps()
			if *simShow {
				t.Logf("sim seed %d:\n%s", seed, h)
			}
			if *simReplay {
				if again := run(seed, cfg, faults); again.Digest() == h.Digest() {
					replayed++
				} else if *simShow {
					t.Logf("sim seed %d: the second run:\n%s", seed, again)
				}
			}
			inv := spec.expect
			if !h.Broke(inv) {
				if vs := h.Violations(); spec.expect == "" && len(vs) > 0 {
					inv = vs[0].Invariant
				} else {
					continue // none, or not the one this mode looks for
				}
			}
			simReport(t, spec, seed, cfg, faults, inv, h, func(c sim.Config, fs []sim.Fault) *sim.History { return run(seed, c, fs) })
			return
		}
		t.Logf("sim %s: seeds %d..%d, %d grants, %d events, %d steps checked, no violation", *simMode, *simFirst, *simFirst+int64(*simSeeds)-1, grants, events, steps)
		if *simReplay {
			t.Logf("sim %s: %d of %d seeds ran twice alike", *simMode, replayed, *simSeeds)
		}
		require.Equal(t, "", spec.expect, "sim %s not found in %d seeds", *simMode, *simSeeds)
	})
}

// simReport shrinks the run of seed that broke inv, prints the smallest
// history found, and fails the test unless the mode looked for inv.
func simReport(t *testing.T, spec simModeSpec, seed int64, cfg sim.Config, faults []sim.Fault, inv string, h *sim.History, run sim.Run) {
	small, fs, sh := sim.Shrink(run, cfg, faults, inv, 150, h)
	var first sim.Violation
	for _, v := range sh.Violations() {
		if v.Invariant == inv {
			first = v
			break
		}
	}
	t.Logf("sim %s seed %d: %s (%d clients, %v, %d faults, %d grants, %d steps checked; shrunk from %d clients, %v, %d faults); smallest history:\n%s",
		*simMode, seed, first, small.Clients, small.Duration, len(fs), sh.Grants(), sh.Steps(), cfg.Clients, cfg.Duration, len(faults), sh.Until(inv))
	if spec.expect == "" {
		assert.Fail(t, fmt.Sprintf("sim seed %d broke %q; replay: go test -run 'TestSim$/%s' -sim.seed=%d -sim.seeds=1 -sim.show -v", seed, inv, *simMode, seed))
		return
	}
	fmt.Printf("simfound %d\n", seed)
	t.Logf("sim %s: found %q at seed %d, as predicted", *simMode, inv, seed)
}
