package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/redislock-go/redislock"
)

// The demo's scenario.
const (
	demoWorkers = 3
	demoJobs    = 6
	demoWork    = 30 * time.Millisecond  // one job's work
	demoLease   = 400 * time.Millisecond // the paused holder's lease
	demoPause   = 600 * time.Millisecond // its pause, past the lease
)

func demoCommand(c *conn) *cobra.Command {
	return &cobra.Command{
		Use:   "demo",
		Short: "Show locks, fences and a stale holder at work (no Redis needed)",
		Long: `Run a short demonstration and print what happened:

  1. workers contend for jobs: each job is a lock, each result is written with
     the grant's fencing token, and every job is done exactly once;
  2. a holder is paused past its lease (as by a GC pause or a stopped VM): the
     next holder takes the lock, and the paused one's late write is refused
     because its fence is stale.

Without --addr, $REDIS_URL, --quorum or --sentinel it runs on an embedded Redis
(miniredis, inside this process). On a real Redis it takes locks named
"demo-RUN:..." and writes records under "redislock-demo:RUN:", which it
deletes at the end (RUN is random).`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError("demo takes no arguments")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return demo(c, cmd.OutOrStdout()) },
	}
}

// demoEnv is where the demo runs.
type demoEnv struct {
	lc      *redislock.Client
	rdb     redis.UniversalClient // writes the fenced results (FencedSet)
	ns      string                // key namespace of this run's records
	locks   string                // key namespace of this run's locks
	elapse  func(time.Duration)   // lets time pass (an embedded Redis fast-forwards its TTLs too)
	cleanup func()
	where   string
}

func newDemoEnv(c *conn) (*demoEnv, error) {
	run := strings.ToLower(rand.Text()[:8])
	ns, locks := "redislock-demo:"+run+":", "demo-"+run+":"
	if !c.given() {
		m := miniredis.NewMiniRedis()
		if err := m.Start(); err != nil {
			return nil, err
		}
		rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
		lc := redislock.New(rdb)
		return &demoEnv{
			lc: lc, rdb: rdb, ns: ns, locks: locks,
			elapse: func(d time.Duration) { time.Sleep(d); m.FastForward(d) },
			cleanup: func() {
				_ = lc.Close()
				_ = rdb.Close()
				m.Close()
			},
			where: "an embedded Redis (miniredis, inside this process; give --addr or REDIS_URL to use a real one)",
		}, nil
	}
	rdbs, quorum, err := c.clients()
	if err != nil {
		return nil, err
	}
	if quorum {
		closeAll(rdbs)
		return nil, usageError("demo runs on one Redis; --quorum is not supported")
	}
	lc := redislock.New(rdbs[0], redislock.WithPrefix(c.prefix))
	return &demoEnv{
		lc: lc, rdb: rdbs[0], ns: ns, locks: locks,
		elapse: time.Sleep,
		cleanup: func() {
			_ = lc.Close()
			closeAll(rdbs)
		},
		where: c.describe(),
	}, nil
}

func demo(c *conn, w io.Writer) error {
	env, err := newDemoEnv(c)
	if err != nil {
		return err
	}
	defer env.cleanup()
	ctx := context.Background()
	defer func() { // the result records; the locks are released or expire
		keys := []string{env.ns + "report"}
		for j := 1; j <= demoJobs; j++ {
			keys = append(keys, fmt.Sprintf("%sjob-%d", env.ns, j))
		}
		_ = env.rdb.Del(ctx, keys...).Err()
	}()
	fmt.Fprintf(w, "redislock demo, on %s\n\n", env.where)
	if err := demoJobsPart(ctx, env, w); err != nil {
		return err
	}
	fmt.Fprintln(w)
	return demoStalePart(ctx, env, w)
}

// demoJobsPart: workers share jobs; a job's lock held by another worker
// means it is being done, and the worker moves on.
func demoJobsPart(ctx context.Context, env *demoEnv, w io.Writer) error {
	fmt.Fprintf(w, "1. %d workers share %d jobs. Each job is a lock; a worker that finds a job's\n", demoWorkers, demoJobs)
	fmt.Fprintln(w, "   lock held moves on, and writes each result with the fence of its grant.")
	type result struct {
		job, worker string
		fence       int64
	}
	var (
		mu      sync.Mutex
		results []result
		held    atomic.Int64
		wg      sync.WaitGroup
		errs    = make(chan error, demoWorkers)
	)
	for i := 1; i <= demoWorkers; i++ {
		worker := fmt.Sprintf("worker-%d", i)
		wg.Add(1)
		go func() { // joined below
			defer wg.Done()
			for j := 1; j <= demoJobs; j++ {
				job := fmt.Sprintf("job-%d", j)
				l, err := env.lc.Obtain(ctx, env.locks+job, 5*time.Second, redislock.WithHolder(worker))
				if errors.Is(err, redislock.ErrNotObtained) {
					held.Add(1)
					continue
				} else if err != nil {
					errs <- err
					return
				}
				// Done already, by a worker before this one?
				if _, _, err := redislock.FencedGet(ctx, env.rdb, env.ns+job); err == nil {
					_ = l.Release(ctx)
					continue
				}
				time.Sleep(demoWork)
				err = redislock.FencedSet(ctx, env.rdb, env.ns+job, "done by "+worker, l.Fence(), time.Minute)
				if err == nil {
					mu.Lock()
					results = append(results, result{job, worker, l.Fence()})
					mu.Unlock()
				}
				if rerr := l.Release(ctx); err == nil {
					err = rerr
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	sort.Slice(results, func(a, b int) bool { return results[a].job < results[b].job })
	done := map[string]int{}
	for _, r := range results {
		fmt.Fprintf(w, "   %-6s done by %s  fence %d\n", r.job, r.worker, r.fence)
		done[r.job]++
	}
	once := len(done) == demoJobs
	for _, n := range done {
		once = once && n == 1
	}
	if once {
		fmt.Fprintf(w, "   Every job was done exactly once; %d attempts found a job's lock held by another worker.\n", held.Load())
	} else {
		fmt.Fprintf(w, "   UNEXPECTED: jobs done %v\n", done)
	}
	return nil
}

// demoStalePart: a holder paused past its lease writes late; its fence is
// refused.
func demoStalePart(ctx context.Context, env *demoEnv, w io.Writer) error {
	fmt.Fprintln(w, "2. A holder paused past its lease cannot overwrite the next holder's work.")
	key, report := env.locks+"report", env.ns+"report"
	step := func(who, what, outcome string) { fmt.Fprintf(w, "   %-9s %-50s %s\n", who, what, outcome) }

	a, err := env.lc.Obtain(ctx, key, demoLease, redislock.WithHolder("worker-A"))
	if err != nil {
		return err
	}
	step("worker-A", fmt.Sprintf("obtains %q for %v", "report", demoLease), fmt.Sprintf("fence %d", a.Fence()))
	step("worker-A", fmt.Sprintf("pauses for %v (a GC pause, a stopped VM)", demoPause), "its lease ends meanwhile")
	env.elapse(demoPause)

	b, err := env.lc.Obtain(ctx, key, 5*time.Second, redislock.WithHolder("worker-B"))
	if err != nil {
		return fmt.Errorf("worker-B: %w", err)
	}
	defer b.Release(ctx)
	step("worker-B", fmt.Sprintf("obtains %q", "report"), fmt.Sprintf("fence %d", b.Fence()))
	if err := redislock.FencedSet(ctx, env.rdb, report, "worker-B's report", b.Fence(), time.Minute); err != nil {
		return err
	}
	step("worker-B", "writes the report with its fence", "accepted")

	valid := time.Until(a.ValidUntil()) > 0
	switch err := redislock.FencedSet(ctx, env.rdb, report, "worker-A's report", a.Fence(), time.Minute); {
	case errors.Is(err, redislock.ErrStaleFence):
		step("worker-A", "wakes up, writes the report with its old fence", "REFUSED: stale fence, a newer holder wrote")
	case err != nil:
		return err
	default:
		step("worker-A", "wakes up, writes the report with its old fence", "UNEXPECTED: accepted")
	}
	if valid {
		step("worker-A", "", "UNEXPECTED: still thinks its lease is valid")
	}
	switch err := a.Release(ctx); {
	case errors.Is(err, redislock.ErrNotHeld):
		step("worker-A", "releases the lock", "not held: it cannot delete worker-B's lock")
	case err != nil:
		return err
	default:
		step("worker-A", "releases the lock", "UNEXPECTED: released")
	}
	v, f, err := redislock.FencedGet(ctx, env.rdb, report)
	if err != nil {
		return err
	}
	info, err := env.lc.Inspect(ctx, key)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "   The report is %q (fence %d); %q is held by %s.\n", v, f, "report", info.Holder)
	return nil
}
