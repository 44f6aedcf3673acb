package lockbench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Blackhole is the quorum scenario with one node blackholed: N nodes, the
// last of them a listener that accepts connections and never answers, one
// worker taking and giving back its own key, against the same with every
// node up. It measures what a dead minority costs Obtain and Release.
const Blackhole = "quorum-blackhole"

// Metrics of the blackhole scenario: each condition's pairs/s and the
// latencies of Obtain and of Release on their own.
const (
	MUpOpsPerSec  = "up_ops_per_sec" // every node up
	MUpObtainP50  = "up_obtain_p50_us"
	MUpObtainP99  = "up_obtain_p99_us"
	MUpReleaseP50 = "up_release_p50_us"
	MUpReleaseP99 = "up_release_p99_us"
	MBhOpsPerSec  = "bh_ops_per_sec" // one node blackholed
	MBhObtainP50  = "bh_obtain_p50_us"
	MBhObtainP99  = "bh_obtain_p99_us"
	MBhReleaseP50 = "bh_release_p50_us"
	MBhReleaseP99 = "bh_release_p99_us"
)

// blackholeNodes is the quorum size of the scenario.
const blackholeNodes = 5

// blackholeCells runs this library's quorum configuration (the others
// would wait for the blackholed node on every call: redsync asks every
// node and waits for each, so a pair takes go-redis' ReadTimeout).
func blackholeCells(cfg *Config, libs []Library, nodesAvail int) ([]*cell, string) {
	if cfg.Backend == BackendPostgres {
		return nil, ""
	}
	if nodesAvail < blackholeNodes {
		return nil, fmt.Sprintf("%s skipped: needs %d nodes, %d available", Blackhole, blackholeNodes, nodesAvail)
	}
	var g []*cell
	for _, l := range libs {
		if l.Primary && l.Quorum && strings.HasPrefix(l.Name, "redislock/") {
			g = append(g, &cell{scenario: Blackhole, workers: 1, nodes: blackholeNodes, lib: l})
		}
	}
	return g, ""
}

// runBlackhole measures the pairs with every node up, then with the last
// node replaced by a blackhole.
func runBlackhole(ctx context.Context, cfg *Config, t *target, c *cell, runID string, f *failures) (map[string]float64, error) {
	out := map[string]float64{}
	up, err := c.lib.New(t.nodes(c.nodes))
	if err != nil {
		return nil, err
	}
	s, err := runPairs(ctx, cfg, t, up, c.nodes, runID+":up", f)
	err = errors.Join(err, closeBounded(up, f.grace))
	if err != nil {
		return nil, err
	}
	out[MUpOpsPerSec], out[MUpObtainP50], out[MUpObtainP99], out[MUpReleaseP50], out[MUpReleaseP99] =
		s.ops, s.obtainP50, s.obtainP99, s.releaseP50, s.releaseP99
	out[MErrors] = s.errors

	hole, err := listenBlackhole()
	if err != nil {
		return nil, err
	}
	defer hole.close()
	// A go-redis client as the other nodes': default timeouts
	// (ReadTimeout 3 s), the run's pool size and ContextTimeoutEnabled.
	dead := redis.NewClient(cfg.libOptions(hole.addr()))
	defer dead.Close()
	nodes := t.nodes(c.nodes)
	nodes[len(nodes)-1] = dead
	bh, err := c.lib.New(nodes)
	if err != nil {
		return nil, err
	}
	s, err = runPairs(ctx, cfg, t, bh, c.nodes-1, runID+":bh", f)
	hole.drop() // the calls still waiting for the node fail, so Close returns
	err = errors.Join(err, closeBounded(bh, f.grace))
	if err != nil {
		return nil, err
	}
	out[MBhOpsPerSec], out[MBhObtainP50], out[MBhObtainP99], out[MBhReleaseP50], out[MBhReleaseP99] =
		s.ops, s.obtainP50, s.obtainP99, s.releaseP50, s.releaseP99
	out[MErrors] += s.errors
	out[MOpsPerSec] = s.ops
	return out, nil
}

// pairStats are one condition's figures.
type pairStats struct {
	ops, obtainP50, obtainP99, releaseP50, releaseP99, errors float64
}

// runPairs is one worker taking and giving back its own key through the
// warm-up and the measured window, timing Obtain and Release apart; INFO
// is read on the first live nodes.
func runPairs(ctx context.Context, cfg *Config, t *target, lk Locker, live int, runID string, f *failures) (pairStats, error) {
	ctx, cancel := context.WithCancel(ctx) // its own: the cell runs two
	defer cancel()
	f.cancel = cancel // no worker of the cell runs now
	var phase atomic.Int32
	var obtain, release hist
	var ops, errs int64
	var wg crew
	wg.Go(func() {
		defer f.catch()
		key := "lockbench:" + runID + ":bh"
		for phase.Load() != phaseStop && ctx.Err() == nil {
			start := time.Now()
			l, err := lk.Obtain(ctx, key, cfg.TTL)
			got := time.Now()
			if err == nil {
				err = l.Release(ctx)
			}
			end := time.Now()
			if err != nil {
				if ctx.Err() == nil {
					errs++
					_ = sleepCtx(ctx, time.Millisecond)
				}
				continue
			}
			if phase.Load() == phaseMeasure {
				obtain.record(got.Sub(start))
				release.record(end.Sub(got))
				ops++
			}
		}
	})
	s0, s1, err := window(ctx, cfg, t, live, &phase, nil)
	late, serr := f.stop(&wg)
	if err = errors.Join(err, serr); err != nil {
		return pairStats{}, err
	}
	errs += int64(late) // a call that returned only when cancelled
	return pairStats{
		ops:        float64(ops) / s1.at.Sub(s0.at).Seconds(),
		obtainP50:  us(obtain.quantile(0.5)),
		obtainP99:  us(obtain.quantile(0.99)),
		releaseP50: us(release.quantile(0.5)),
		releaseP99: us(release.quantile(0.99)),
		errors:     float64(errs),
	}, nil
}

// blackhole is a TCP listener that accepts connections and never answers,
// until drop.
type blackhole struct {
	ln      net.Listener
	mu      sync.Mutex
	conns   []net.Conn // guarded by mu
	dropped bool       // guarded by mu: connections are closed at once
	wg      sync.WaitGroup
}

func listenBlackhole() (*blackhole, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h := &blackhole{ln: ln}
	h.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			h.mu.Lock()
			if h.dropped {
				_ = c.Close()
			} else {
				h.conns = append(h.conns, c)
			}
			h.mu.Unlock()
		}
	})
	return h, nil
}

func (h *blackhole) addr() string { return h.ln.Addr().String() }

// drop closes the connections, and from now on each one it accepts: the
// calls waiting on them fail at once (without the log lines of refused
// dials).
func (h *blackhole) drop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dropped = true
	for _, c := range h.conns {
		_ = c.Close()
	}
	h.conns = nil
}

// close stops the listener.
func (h *blackhole) close() {
	h.drop()
	_ = h.ln.Close()
	h.wg.Wait()
}

// writeBlackholeTable prints the scenario's table, if it ran.
func writeBlackholeTable(w interface{ Write([]byte) (int, error) }, rep *Report, md bool) {
	var rs []*Result
	for _, r := range rep.Results {
		if r.Scenario == Blackhole && len(r.Samples) > 0 {
			rs = append(rs, r)
		}
	}
	if len(rs) == 0 {
		return
	}
	sep := "  "
	if md {
		fmt.Fprintf(w, "\n**Quorum, one node blackholed** (N=%d, 1 worker, its own key; the last node accepts connections and never answers; latencies in µs)\n\n", blackholeNodes)
		fmt.Fprintln(w, "| library | pairs/s up | pairs/s blackholed | Obtain p50/p99 up | Obtain p50/p99 blackholed | Release p50/p99 up | Release p50/p99 blackholed | Release p99 × up | errors |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	} else {
		fmt.Fprintf(w, "\nQuorum, one node blackholed (N=%d, 1 worker; latencies in µs)\n", blackholeNodes)
		fmt.Fprintf(w, "%-22s%s%-18s%s%-18s%s%-14s%s%-14s%s%-14s%s%-14s%s%s\n", "library", sep, "pairs/s up", sep, "pairs/s bh", sep,
			"obtain up", sep, "obtain bh", sep, "release up", sep, "release bh", sep, "rel p99 × up")
	}
	for _, r := range rs {
		pp := func(a, b string) string { return med(r, a) + "/" + med(r, b) }
		ratio := metric(r, MBhReleaseP99) / metric(r, MUpReleaseP99)
		if md {
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %.2f | %s |\n", r.Library, spread(r, MUpOpsPerSec), spread(r, MBhOpsPerSec),
				pp(MUpObtainP50, MUpObtainP99), pp(MBhObtainP50, MBhObtainP99), pp(MUpReleaseP50, MUpReleaseP99), pp(MBhReleaseP50, MBhReleaseP99),
				ratio, med(r, MErrors))
			continue
		}
		fmt.Fprintf(w, "%-22s%s%-18s%s%-18s%s%-14s%s%-14s%s%-14s%s%-14s%s%.2f\n", r.Library, sep, spread(r, MUpOpsPerSec), sep, spread(r, MBhOpsPerSec), sep,
			pp(MUpObtainP50, MUpObtainP99), sep, pp(MBhObtainP50, MBhObtainP99), sep, pp(MUpReleaseP50, MUpReleaseP99), sep, pp(MBhReleaseP50, MBhReleaseP99), sep, ratio)
	}
}
