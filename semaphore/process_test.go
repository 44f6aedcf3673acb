package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/proctest"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/semaphore"
)

// The process test runs holders in child processes (the test binary run
// again) on one real Redis.
//
// A child ("sem-worker", spec "addr|name|limit|workers|ttl ms|tag|paused")
// runs workers goroutines (with the lease TTL as queue TTL) that, until the parent closes its stdin, each:
// acquire a permit (renewed by lease.Hold), write "<tag>" to the slot's
// fenced sink (redislock.FencedSet on "sink:<slot>"), work a few ms, write
// again (the commit), release. The workers do not look at their Hold's
// context: a holder that was paused past its lease carries on, as a
// careless one would, and only the fence stops its writes. With paused=1,
// worker 0 holds its first permit until the parent sends "COMMIT".
//
// Lines (times are wall-clock ns, comparable across the processes):
//
//	GRANT <w> <slot> <fence> <t>             Acquire returned at t
//	WRITE|COMMIT <w> <slot> <fence> <t> <r>  a fenced write called at t: ok, stale or err
//	HOLDING                                  worker 0 of a paused child holds its permit
//	RELEASE <w> <slot> <fence> <t> <valid>   Release called at t; valid: the end of the
//	                                         last validity the permit confirmed
//	EXPIRED                                  a grant came back after its validity (the
//	                                         process was stopped while it was on the way)
const workerRole = "sem-worker"

func TestWorkerProcess(t *testing.T) {
	t.Parallel()
	spec, ok := proctest.Child(workerRole)
	if !ok {
		t.Skip("only runs as a child process of the semaphore process test")
	}
	f := strings.Split(spec, "|")
	limit, _ := strconv.Atoi(f[2])
	workers, _ := strconv.Atoi(f[3])
	ttlMS, _ := strconv.Atoi(f[4])
	ttl := time.Duration(ttlMS) * time.Millisecond
	tag, paused := f[5], f[6] == "1"
	rdb := redis.NewClient(&redis.Options{Addr: f[0]})
	defer rdb.Close()
	// Queue entries of the stopped process's waiters hold up the queue
	// until they expire: keep that short.
	s, err := semaphore.New(rdb, f[1], limit, semaphore.WithHolder(tag), semaphore.WithQueueTTL(ttl))
	require.NoError(t, err)
	defer s.Close()

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	commit := make(chan struct{})
	go func() {
		for cmd := range proctest.Commands() {
			if cmd == "COMMIT" {
				close(commit)
			}
		}
		stop() // stdin closed: finish
	}()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for first := true; ctx.Err() == nil; first = false {
				work(ctx, s, rdb, w, ttl, tag, paused && w == 0 && first, commit)
			}
		})
	}
	wg.Wait()
}

// validity records the end of the last validity a permit confirmed, which
// ValidUntil forgets (zero) once the permit is known lost.
type validity struct {
	lease.Lock
	last atomic.Int64 // wall-clock ns
}

func wall(t time.Time) int64 { return time.Now().UnixNano() + int64(time.Until(t)) }

func (v *validity) Refresh(ctx context.Context, ttl time.Duration) error {
	err := v.Lock.Refresh(ctx, ttl)
	if err == nil {
		v.last.Store(wall(v.Lock.ValidUntil()))
	}
	return err
}

func work(ctx context.Context, s *semaphore.Semaphore, rdb *redis.Client, w int, ttl time.Duration, tag string, hold bool, commit <-chan struct{}) {
	p, err := s.Acquire(ctx, ttl)
	if errors.Is(err, lease.ErrGrantExpired) {
		// Granted, but the reply came after the validity (the process
		// was stopped meanwhile): given back, as it must be.
		proctest.Emit("EXPIRED")
		return
	}
	if err != nil {
		if ctx.Err() == nil {
			proctest.Emit("ERROR acquire %v", err)
		}
		return
	}
	proctest.Emit("GRANT %d %d %d %d", w, p.Slot(), p.Fence(), time.Now().UnixNano())
	v := &validity{Lock: p}
	v.last.Store(wall(p.ValidUntil()))
	h, err := lease.Hold(context.Background(), v, ttl)
	if err != nil {
		proctest.Emit("ERROR hold %v", err)
		return
	}
	write := func(what string) {
		call := time.Now().UnixNano()
		err := redislock.FencedSet(context.Background(), rdb, fmt.Sprintf("sink:%d", p.Slot()), tag, p.Fence(), time.Minute)
		r := "ok"
		switch {
		case errors.Is(err, redislock.ErrStaleFence):
			r = "stale"
		case err != nil:
			r = "err:" + strings.ReplaceAll(err.Error(), " ", "_")
		}
		proctest.Emit("%s %d %d %d %d %s", what, w, p.Slot(), p.Fence(), call, r)
	}
	write("WRITE")
	if hold {
		proctest.Emit("HOLDING")
		<-commit
	} else {
		time.Sleep(time.Duration(2+rand.IntN(8)) * time.Millisecond) // the work
	}
	write("COMMIT")
	proctest.Emit("RELEASE %d %d %d %d %d", w, p.Slot(), p.Fence(), time.Now().UnixNano(), v.last.Load())
	_ = h.Release(context.Background())
}

// event is one parsed line of a child.
type event struct {
	line       string
	proc       int
	kind       string
	worker     int
	slot       int
	fence, at  int64
	result     string
	validUntil int64
}

func parse(proc int, l string) (event, bool) {
	f := strings.Fields(l)
	e := event{line: l, proc: proc, kind: f[0]}
	if len(f) < 5 {
		return e, len(f) > 0
	}
	e.worker, _ = strconv.Atoi(f[1])
	e.slot, _ = strconv.Atoi(f[2])
	e.fence, _ = strconv.ParseInt(f[3], 10, 64)
	e.at, _ = strconv.ParseInt(f[4], 10, 64)
	if len(f) > 5 {
		e.result = f[5]
		e.validUntil, _ = strconv.ParseInt(f[5], 10, 64)
	}
	return e, true
}

// 20 workers in 2 processes on 4 slots; one process is SIGSTOPped while it
// holds a permit, past its leases, until the other process has taken and
// written every slot. Never more than 4 holders are valid at once (by the
// holders' own validity, across processes, and on the server at every
// check), and every write the stopped holders make with their old fences
// after they resume is refused.
func TestProcessesStoppedHolders(t *testing.T) {
	t.Parallel()
	const limit, perProc = 4, 10
	ttl := 300 * time.Millisecond
	srv := redistest.Start(t)
	name := "slots"
	spec := func(tag string, paused bool) string {
		p := 0
		if paused {
			p = 1
		}
		return fmt.Sprintf("%s|%s|%d|%d|%d|%s|%d", srv.Addr(), name, limit, perProc, ttl.Milliseconds(), tag, p)
	}
	procs := []*proctest.Proc{
		proctest.Start(t, "TestWorkerProcess", workerRole, spec("child0", true)),
		proctest.Start(t, "TestWorkerProcess", workerRole, spec("child1", false)),
	}
	lines := make(chan event)
	var fan sync.WaitGroup
	for i, p := range procs {
		fan.Go(func() {
			for l := range p.Lines() {
				if e, ok := parse(i, l); ok {
					lines <- e
				}
			}
		})
	}
	go func() { fan.Wait(); close(lines) }()
	var events []event
	deadline := time.After(time.Minute) // a failure bound: the test takes about a second
	next := func() event {
		select {
		case <-deadline:
			t.Fatal("the test did not reach its end within a minute")
		case e, ok := <-lines:
			require.True(t, ok, "the children exited")
			assert.NotEqual(t, "ERROR", e.kind, "child %d: %s", e.proc, e.line)
			events = append(events, e)
			return e
		case <-time.After(proctest.Timeout):
			t.Fatal("the children said nothing")
		}
		return event{}
	}
	s := newSem(t, srv.Client(nil), name, limit)
	ctx := context.Background()
	inspect := func() semaphore.Info {
		info, err := s.Inspect(ctx)
		require.NoError(t, err)
		assert.LessOrEqual(t, len(info.Holders), limit, "the server lists %d holders, limit %d", len(info.Holders), limit)
		return info
	}

	// Phase 1: both run; stop child 0 once its worker 0 holds a permit.
	for e := next(); !(e.proc == 0 && e.kind == "HOLDING"); e = next() {
	}
	procs[0].Signal(t, syscall.SIGSTOP)
	// Phase 2: wait (on child 1's events) until the server holds none of
	// child 0's permits; then every fence child 0 holds is at most f1.
	var f1 int64
	for f1 == 0 {
		e := next()
		if e.proc != 1 {
			continue
		}
		if slices.ContainsFunc(inspect().Holders, func(h semaphore.Holder) bool { return h.Holder == "child0" }) {
			continue
		}
		v, err := srv.Do("GET", semaphore.Keys(s)[4])
		require.NoError(t, err)
		f1, _ = strconv.ParseInt(fmt.Sprint(v), 10, 64)
	}
	// Phase 3: wait until child 1 has written every slot with a newer fence.
	written := map[int]bool{}
	for len(written) < limit {
		e := next()
		if e.proc == 1 && e.kind == "WRITE" && e.result == "ok" && e.fence > f1 {
			written[e.slot] = true
		}
		inspect()
	}
	resumed := time.Now().UnixNano()
	procs[0].Signal(t, syscall.SIGCONT)
	procs[0].Send(t, "COMMIT")
	// Phase 4: run on until the paused holder committed and child 0 was
	// granted again 10 times; then stop both.
	committed, regranted := false, 0
	for !committed || regranted < 10 {
		e := next()
		switch {
		case e.proc == 0 && e.kind == "COMMIT" && e.worker == 0 && e.fence <= f1:
			committed = true
		case e.proc == 0 && e.kind == "GRANT" && e.at > resumed:
			regranted++
		}
	}
	for _, p := range procs {
		p.CloseStdin()
	}
	for e, ok := <-lines; ok; e, ok = <-lines {
		events = append(events, e)
	}
	for _, p := range procs {
		assert.NoError(t, p.Wait(t), "%s", p.Name)
	}
	check(t, events, limit, f1, resumed)
}

// check judges the history: at most limit holders valid at any instant,
// and every write made with a fence up to f1 after resumed refused.
func check(t *testing.T, events []event, limit int, f1, resumed int64) {
	type span struct{ from, to int64 }
	grants := map[[2]int64]int64{} // (proc, fence) -> grant time
	var spans []span
	stale, grantsN, expired := 0, 0, 0
	for _, e := range events {
		key := [2]int64{int64(e.proc), e.fence}
		switch e.kind {
		case "EXPIRED":
			expired++
		case "GRANT":
			grants[key] = e.at
			grantsN++
		case "RELEASE":
			from, ok := grants[key]
			require.True(t, ok, "release without grant: %+v", e)
			spans = append(spans, span{from, min(e.at, e.validUntil)})
		case "WRITE", "COMMIT":
			if e.proc == 0 && e.fence <= f1 && e.at > resumed {
				assert.Equal(t, "stale", e.result, "a stale holder's %s (fence %d <= %d, slot %d) after it resumed: %s, want stale", e.kind, e.fence, f1, e.slot, e.result)
				stale++
			}
		}
	}
	assert.NotEqual(t, 0, stale, "no stale write was tried: the test proved nothing")
	// Sweep: +1 at each validity start, -1 at each end (ends first on ties).
	type edge struct {
		at int64
		d  int
	}
	var edges []edge
	for _, s := range spans {
		if s.to > s.from {
			edges = append(edges, edge{s.from, 1}, edge{s.to, -1})
		}
	}
	slices.SortFunc(edges, func(a, b edge) int {
		if a.at != b.at {
			return int(a.at - b.at)
		}
		return a.d - b.d
	})
	most, n := 0, 0
	for _, e := range edges {
		n += e.d
		most = max(most, n)
	}
	assert.LessOrEqual(t, most, limit, "%d holders were valid at once, limit %d", most, limit)
	t.Logf("%d grants (and %d that came back after their validity), %d validity spans, at most %d valid at once; %d stale writes refused",
		grantsN, expired, len(spans), most, stale)
}
