package redislock_test

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/sim"
)

// simWorld is one run of the simulation: miniredis nodes running the
// project's scripts, each behind the simulated network and on a clock of
// its own, and the clients' history.
type simWorld struct {
	seed   int64
	cfg    sim.Config
	start  time.Time
	nodes  []*miniredis.Miniredis
	clocks []*sim.Clock
	net    *sim.Network
	hist   *sim.History
	mut    simMutation // the broken behaviour, if any (sim_mutate_test.go)
	done   chan struct{}
	wg     sync.WaitGroup

	mu    sync.Mutex
	downs []int // per node: faults that hold it down
	holes []int // per node: faults that blackhole it
}

// runSeed runs seed with cfg and faults, in the world broken by the
// mutation named mutate (none: ""), and returns its history, checked on
// every step and at the end. It runs inside a synctest bubble (the whole
// process's only one: see TestSim).
func runSeed(seed int64, cfg sim.Config, faults []sim.Fault, mutate string) *sim.History {
	// Every run starts on a whole second of the bubble's clock, so that
	// the clocks' readings, in µs for fences, are the same in every run
	// of a seed (the wait is virtual: it costs nothing).
	pass(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
	w := newSimWorld(seed, cfg, simMutations[mutate])
	w.run(faults)
	return w.hist
}

func newSimWorld(seed int64, cfg sim.Config, mut simMutation) *simWorld {
	w := &simWorld{seed: seed, cfg: cfg, mut: mut, start: time.Now(), done: make(chan struct{})}
	var rw *scriptRewriter
	if mut.script != nil {
		rw = &scriptRewriter{rewrite: mut.script, shas: map[string]string{}}
	}
	w.hist = sim.NewHistory(w.start)
	r := sim.NewRand(seed, 4)
	var ns []sim.Node
	for i := range cfg.Nodes {
		drift := (2*r.Float64() - 1) * cfg.Drift
		if cfg.DriftFast {
			drift = cfg.Drift * (0.5 + r.Float64()/2)
		}
		c := sim.NewClock(w.start, 0, drift)
		m := miniredis.NewMiniRedis()
		m.SetTime(c.Read(w.start))
		m.ClockTTL(true)
		if rw != nil {
			rw.install(m)
		}
		w.nodes, w.clocks = append(w.nodes, m), append(w.clocks, c)
		ns = append(ns, sim.Node{Dial: m.Dial, Deliver: func() { m.SetTime(c.Read(time.Now())) }})
		w.hist.Log(-1, "node %d clock rate %.4f", i, c.Rate())
	}
	w.net = sim.NewNetwork(seed, ns)
	w.downs, w.holes = make([]int, cfg.Nodes), make([]int, cfg.Nodes)
	return w
}

func (w *simWorld) majority() int { return w.cfg.Nodes/2 + 1 }

// run plays the faults and the clients' workload, then checks the history.
func (w *simWorld) run(faults []sim.Fault) {
	w.wg.Add(2)
	go func() { defer w.wg.Done(); w.playFaults(faults) }()
	go func() { defer w.wg.Done(); w.probe() }()
	var clients sync.WaitGroup
	for c := range w.cfg.Clients {
		clients.Add(1)
		go func() { defer clients.Done(); w.client(c) }()
	}
	clients.Wait()
	close(w.done)
	w.wg.Wait()
	w.check()
	w.hist.Final()
	w.net.Close()
	for _, m := range w.nodes {
		m.Close()
	}
}

// sleep waits d, or less when the run ends; false when it ended.
func (w *simWorld) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-w.done:
		return false
	}
}

func (w *simWorld) playFaults(faults []sim.Fault) {
	var heals sync.WaitGroup
	defer heals.Wait()
	for _, f := range faults {
		if !w.sleep(time.Until(w.start.Add(f.At))) {
			return
		}
		w.hist.Log(-1, "fault %s", f)
		w.apply(f, true)
		if f.For > 0 {
			heals.Add(1)
			go func() {
				defer heals.Done()
				w.sleep(f.For) // healed early when the run ends
				w.hist.Log(-1, "healed node %d %s", f.Node, f.Kind)
				w.apply(f, false)
			}()
		}
	}
}

// apply starts (on) or ends a fault. Faults of one node overlap: it is
// down (blackholed) while any fault holds it down (blackholed).
func (w *simWorld) apply(f sim.Fault, on bool) {
	switch f.Kind {
	case sim.FaultCut:
		w.net.Cut(f.Node)
		return
	case sim.FaultStep:
		now := time.Now()
		w.clocks[f.Node].Step(now, f.By)
		w.nodes[f.Node].SetTime(w.clocks[f.Node].Read(now))
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	d := -1
	if on {
		d = 1
	}
	s := w.net.Get(f.Node)
	switch f.Kind {
	case sim.FaultDelay:
		s.DelayLo, s.DelayHi = 0, 0
		if on {
			s.DelayLo, s.DelayHi = f.Lo, f.Hi
		}
	case sim.FaultBlackhole:
		w.holes[f.Node] += d
		s.Blackhole = w.holes[f.Node] > 0
	case sim.FaultDrop:
		s.DropReply = 0
		if on {
			s.DropReply = f.P
		}
	case sim.FaultRestart, sim.FaultAmnesia:
		w.downs[f.Node] += d
		s.Down = w.downs[f.Node] > 0
	}
	w.net.Set(f.Node, s)
	if on && f.Kind == sim.FaultAmnesia {
		w.nodes[f.Node].FlushAll()
	}
}

// probe checks the nodes every 2 ms of simulated time.
func (w *simWorld) probe() {
	for w.sleep(2 * time.Millisecond) {
		w.check()
	}
}

func (w *simWorld) check() {
	now := time.Now()
	for i, m := range w.nodes {
		m.SetTime(w.clocks[i].Read(now))
	}
	var bare []string
	for i, m := range w.nodes {
		for _, k := range m.Keys() {
			if m.TTL(k) == 0 {
				bare = append(bare, fmt.Sprintf("node %d key %q", i, k))
			}
		}
	}
	// A grant is held while a majority of the nodes hold its token or are
	// down (a node that is down grants no one; within the assumptions it
	// comes back with its data, or empty only after the longest TTL).
	w.hist.Probe(now, func(g *sim.Grant) bool {
		n := 0
		for i, m := range w.nodes {
			if v, err := m.Get(redislock.LockKey(g.Key)); w.net.Get(i).Down || err == nil && strings.HasPrefix(v, g.Token+":") {
				n++
			}
		}
		return n >= w.majority()
	}, bare)
}

// newClient is client c's Client, on go-redis clients that dial through
// the network, with its wall clock skewed.
func (w *simWorld) newClient(c int, r *sim.Rand) (*redislock.Client, func()) {
	var rdbs []redis.UniversalClient
	for i := range w.cfg.Nodes {
		rdbs = append(rdbs, redis.NewClient(&redis.Options{
			Addr:                     fmt.Sprintf("127.0.0.1:%d", 10000+i), // never dialled: the Dialer is the network
			Dialer:                   w.net.Dialer(c, i),
			ContextTimeoutEnabled:    true,
			DisableIdentity:          true,
			MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
			PoolSize:                 4,
			DialTimeout:              100 * time.Millisecond,
			ReadTimeout:              300 * time.Millisecond,
			WriteTimeout:             300 * time.Millisecond,
		}))
	}
	clock := sim.NewClock(w.start, r.Between(-w.cfg.Skew, w.cfg.Skew), 0)
	opts := []redislock.ClientOption{redislock.WithReleaseTimeout(time.Second),
		redislock.WithWallClock(func() time.Time { return clock.Read(time.Now()) })}
	var cl *redislock.Client
	if w.cfg.Nodes == 1 {
		// No pub/sub: go-redis' PubSub reads and dials under a mutex, and
		// a goroutine waiting on a mutex is not durably blocked, so a
		// second one waiting for it would stop the bubble's clock for good.
		cl = redislock.New(rdbs[0], append(opts, redislock.WithNotify(false))...)
	} else {
		var err error
		if cl, err = redislock.NewQuorum(rdbs, opts...); err != nil {
			panic(err)
		}
	}
	return cl, func() {
		_ = cl.Close()
		for _, rdb := range rdbs {
			_ = rdb.Close()
		}
	}
}

// pass lets d of the bubble's clock pass for the calling goroutine. It is
// the simulation's one sleep, and a sleep on purpose: inside the synctest
// bubble time is virtual (it advances when every goroutine is blocked), so
// this waits for nothing real and costs nothing; it is how a simulated
// client holds a lock, thinks between calls or arrives late.
func pass(d time.Duration) { time.Sleep(d) }
