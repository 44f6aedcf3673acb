package lockbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/stampede"
)

// The stampede scenario: cfg.StampedeCallers concurrent requests for one
// cold cache key, round after round with a fresh key, each fill taking
// cfg.StampedeFill. It measures how many fills ran per key, how long after
// the fill's end the callers had the value, and the Redis cost per key.
//
// The stampede package runs as cfg.StampedeProcs Groups, each on its own
// Client (its own subscription, as separate processes have). Each library
// of the comparison runs the pattern users write by hand on top of a lock:
// read the cache; on a miss take the lock (with the library's waiting
// policy), read again, fill and write if still missing, release.
const Stampede = "stampede"

// Metrics of the stampede scenario.
const (
	MFillsPerKey = "fills_per_key"
	MValueP50    = "value_p50_us" // fill's end -> a caller has the value
	MValueP99    = "value_p99_us"
	MValueMax    = "value_max_us"
)

// stampedeLib is this module's stampede package in the comparison.
var stampedeLib = Library{
	Name: "redislock/stampede",
	Note: "stampede.Group per process: in-process flight, fill lock, notified waiting",
	New: func(nodes []redis.UniversalClient) (Locker, error) {
		if len(nodes) != 1 {
			return nil, errSkip
		}
		return &stampedeNodes{rdb: nodes[0]}, nil
	},
}

// stampedeNodes carries the node to the scenario; it is no lock adapter.
type stampedeNodes struct{ rdb redis.UniversalClient }

func (*stampedeNodes) Obtain(context.Context, string, time.Duration) (Held, error) {
	return nil, errSkip
}
func (*stampedeNodes) Close() error { return nil }

// stampedeCells is the comparison group of the scenario: the stampede
// package (when a redislock library is selected) and the primary
// configuration of every library.
func stampedeCells(cfg *Config, libs []Library) []*cell {
	var g []*cell
	if cfg.Backend == BackendPostgres {
		return nil // the scenario keeps its cache in Redis
	}
	for _, l := range libs {
		if l.Primary && strings.HasPrefix(l.Name, "redislock/") && len(g) == 0 {
			g = append(g, &cell{scenario: Stampede, workers: cfg.StampedeCallers, nodes: 1, lib: stampedeLib})
		}
	}
	for _, l := range libs {
		if l.Primary {
			g = append(g, &cell{scenario: Stampede, workers: cfg.StampedeCallers, nodes: 1, lib: l})
		}
	}
	return g
}

// coldKey is one round: its fills and when the last one ended.
type coldKey struct {
	fills   atomic.Int32
	fillEnd atomic.Int64 // ns since the run's base
}

func runStampede(ctx context.Context, cfg *Config, t *target, lk Locker, callers, nodes int, runID string, f *failures) (map[string]float64, error) {
	base := time.Now()
	fill := func(k *coldKey) stampede.Fill {
		return func(ctx context.Context) ([]byte, error) {
			k.fills.Add(1)
			if err := sleepCtx(ctx, cfg.StampedeFill); err != nil {
				return nil, err
			}
			k.fillEnd.Store(int64(time.Since(base)))
			return []byte("value"), nil
		}
	}
	var do func(ctx context.Context, caller int, key string, k *coldKey) error
	if sn, ok := lk.(*stampedeNodes); ok {
		groups, closeAll, err := stampedeGroups(sn.rdb, cfg.StampedeProcs)
		if err != nil {
			return nil, err
		}
		defer closeAll()
		do = func(ctx context.Context, caller int, key string, k *coldKey) error {
			_, err := groups[caller%len(groups)].Do(ctx, key, time.Minute, fill(k))
			return err
		}
	} else {
		rdb := t.clients[0]
		do = func(ctx context.Context, _ int, key string, k *coldKey) error {
			return handRolled(ctx, cfg, rdb, lk, key, fill(k))
		}
	}
	var (
		vals         hist
		keys, fillsN int64
		errs         atomic.Int64
		s0           snapshot
		stalled      int
	)
	measuring := false
	warmEnd := base.Add(cfg.Warmup)
	var end time.Time
	for round := 0; ctx.Err() == nil; round++ {
		now := time.Now()
		if !measuring && !now.Before(warmEnd) {
			measuring, s0 = true, t.snap(ctx, nodes)
			end = s0.at.Add(cfg.Duration)
		}
		if measuring && !now.Before(end) && keys > 0 {
			break
		}
		key := fmt.Sprintf("lockbench:%s:s:%d", runID, round)
		k := &coldKey{}
		rets := make([]int64, callers)
		var wg crew
		for c := range callers {
			wg.Go(func() {
				defer f.catch()
				octx, cancel := context.WithTimeout(ctx, cfg.WaitTimeout)
				defer cancel()
				if err := do(octx, c, key, k); err != nil {
					if ctx.Err() == nil {
						errs.Add(1)
					}
					rets[c] = -1
					return
				}
				rets[c] = int64(time.Since(base))
			})
		}
		late, err := f.stop(&wg)
		if err != nil {
			return nil, err
		}
		stalled += late
		if !measuring {
			continue
		}
		keys++
		fillsN += int64(k.fills.Load())
		for _, r := range rets {
			if r >= 0 {
				vals.record(time.Duration(max(0, r-k.fillEnd.Load())))
			}
		}
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	s1 := t.snap(ctx, nodes)
	n := float64(keys)
	return serverMetrics(map[string]float64{
		MOpsPerSec:   n / s1.at.Sub(s0.at).Seconds(),
		MFillsPerKey: float64(fillsN) / n,
		MValueP50:    us(vals.quantile(0.5)),
		MValueP99:    us(vals.quantile(0.99)),
		MValueMax:    us(vals.max),
		MCallsPerOp:  perOp(s0.calls, s1.calls, n),
		MSentPerOp:   perOp(s0.sent, s1.sent, n),
		MErrors:      float64(errs.Load()),
		MStalled:     float64(stalled),
	}, s0, s1, n), nil
}

// stampedeGroups makes procs Groups, each on a Client of its own.
func stampedeGroups(rdb redis.UniversalClient, procs int) ([]*stampede.Group, func(), error) {
	var groups []*stampede.Group
	var clients []*redislock.Client
	closeAll := func() {
		for _, g := range groups {
			_ = g.Close()
		}
		for _, c := range clients {
			_ = c.Close()
		}
	}
	for range procs {
		c := redislock.New(rdb)
		clients = append(clients, c)
		g, err := stampede.New(c.Locker(), c.Store())
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		groups = append(groups, g)
	}
	return groups, closeAll, nil
}

// handRolled is the cache fill users write on a lock: read, lock, read
// again, fill, write, release.
func handRolled(ctx context.Context, cfg *Config, rdb redis.UniversalClient, lk Locker, key string, fill stampede.Fill) error {
	cacheKey := key + ":cache"
	if err := rdb.Get(ctx, cacheKey).Err(); err == nil || !errors.Is(err, redis.Nil) {
		return err
	}
	for {
		l, err := lk.Obtain(ctx, key+":lock", cfg.TTL)
		if errors.Is(err, ErrBusy) && ctx.Err() == nil {
			continue
		}
		if err != nil {
			return err
		}
		err = rdb.Get(ctx, cacheKey).Err()
		if errors.Is(err, redis.Nil) {
			var v []byte
			if v, err = fill(ctx); err == nil {
				err = rdb.Set(ctx, cacheKey, v, time.Minute).Err()
			}
		}
		if rerr := l.Release(ctx); err == nil {
			err = rerr
		}
		return err
	}
}

// isStampede reports a result group of the stampede scenario.
func isStampede(g []*Result) bool { return len(g) > 0 && g[0].Scenario == Stampede }

// writeStampedeTable prints the stampede results.
func writeStampedeTable(w io.Writer, rep *Report) {
	var groups [][]*Result
	for _, g := range groupsOf(rep) {
		if isStampede(g) {
			groups = append(groups, g)
		}
	}
	if len(groups) == 0 {
		return
	}
	c := rep.Config
	fmt.Fprintf(w, "\nStampede: %d concurrent requests per cold key (the stampede package in %d processes), fill %s; value = fill's end -> caller has the value\n",
		c.StampedeCallers, c.StampedeProcs, c.StampedeFill)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "library\trequests\tkeys/s\tfills/key\tvalue p50\tvalue p99\tvalue max\tredis calls/key\tsent/key\terrors\tnote\t")
	for _, g := range groups {
		for _, r := range g {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Library, r.Workers, med(r, MOpsPerSec), med(r, MFillsPerKey),
				med(r, MValueP50), spread(r, MValueP99), med(r, MValueMax), med(r, MCallsPerOp), med(r, MSentPerOp), med(r, MErrors), noteOf(r))
		}
	}
	tw.Flush()
}

// writeStampedeMarkdown writes the stampede table for a README.
func writeStampedeMarkdown(b *strings.Builder, rep *Report) {
	first := true
	for _, g := range groupsOf(rep) {
		if !isStampede(g) {
			continue
		}
		if first {
			c := rep.Config
			fmt.Fprintf(b, "\n**Stampede** (%d concurrent requests per cold key, the stampede package in %d processes, fill %s; value = from the fill's end to the caller having the value)\n\n",
				c.StampedeCallers, c.StampedeProcs, c.StampedeFill)
			b.WriteString("| library | keys/s | fills/key | value p50 | value p99 | value max | Redis calls/key | sent/key |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
			first = false
		}
		for _, r := range g {
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", mdLib(r), med(r, MOpsPerSec), med(r, MFillsPerKey),
				med(r, MValueP50), spread(r, MValueP99), med(r, MValueMax), med(r, MCallsPerOp), med(r, MSentPerOp))
		}
	}
}
