package stampede_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/proctest"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/stampede"
)

// The process tests run callers in child processes (the test binary run
// again) on one real Redis, as a web fleet would.
//
// A child ("stampede-caller", spec "addr|key|callers|lockTTL") runs a
// Group on its own Client and as many concurrent Do calls for key. It
// reports "JOINED" once every caller is in the flight, "WAIT" when the
// flight waits for another process's lock, "FILLING" when its fill
// starts. The fill counts itself in Redis ("fills:<key>"), waits for the
// parent's "GO", and returns the wall-clock time (ns) it ended at, so
// that every caller can measure how long after the fill's end it got the
// value. At the end the child reports "DONE <ok> <errors> <µs,...>" and
// exits when the parent closes its stdin.
const callerRole = "stampede-caller"

func TestCallerProcess(t *testing.T) {
	t.Parallel()
	spec, ok := proctest.Child(callerRole)
	if !ok {
		t.Skip("only runs as a child process of the stampede process tests")
	}
	f := strings.Split(spec, "|")
	addr, key := f[0], f[1]
	n, _ := strconv.Atoi(f[2])
	lockMS, _ := strconv.Atoi(f[3])
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	c := redislock.New(rdb)
	defer c.Close()
	var mu sync.Mutex
	joined := 0
	hook := stampede.WithTestHook(func(ev, _ string) {
		switch ev {
		case stampede.EvJoin:
			mu.Lock()
			joined++
			if joined == n {
				proctest.Emit("JOINED")
			}
			mu.Unlock()
		case stampede.EvWait:
			proctest.Emit("WAIT")
		case stampede.EvFill:
			proctest.Emit("FILLING")
		}
	})
	g, err := stampede.New(c.Locker(), c.Store(), stampede.WithLease(time.Duration(lockMS)*time.Millisecond), hook)
	require.NoError(t, err)
	defer g.Close()

	goCh := make(chan struct{})
	cmds := proctest.Commands()
	cmdsDone := make(chan struct{})
	go func() {
		defer close(cmdsDone)
		once := sync.Once{}
		for cmd := range cmds {
			if cmd == "GO" {
				once.Do(func() { close(goCh) })
			}
		}
	}()
	fill := func(ctx context.Context) ([]byte, error) {
		if err := rdb.Incr(ctx, "fills:"+key).Err(); err != nil {
			return nil, err
		}
		select {
		case <-goCh:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return []byte(strconv.FormatInt(time.Now().UnixNano(), 10)), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lat := make([]string, n)
	errs := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			v, err := g.Do(ctx, key, time.Minute, fill)
			now := time.Now().UnixNano()
			if err != nil {
				errs[i] = err.Error()
				return
			}
			end, _ := strconv.ParseInt(string(v), 10, 64)
			lat[i] = strconv.FormatInt((now-end)/1e3, 10)
		})
	}
	wg.Wait()
	good, bad := 0, 0
	var lats []string
	for i := range n {
		if errs[i] != "" {
			bad++
			fmt.Fprintf(os.Stderr, "caller %d: %s\n", i, errs[i])
			continue
		}
		good++
		lats = append(lats, lat[i])
	}
	proctest.Emit("DONE %d %d %s", good, bad, strings.Join(lats, ","))
	<-cmdsDone
}

// line is one line of one child.
type line struct {
	from int
	text string
}

// fanIn merges the children's lines until t ends.
func fanIn(t *testing.T, procs []*proctest.Proc) <-chan line {
	out := make(chan line)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, p := range procs {
		wg.Go(func() {
			for l := range p.Lines() {
				select {
				case out <- line{i, l}:
				case <-stop:
					return
				}
			}
		})
	}
	t.Cleanup(func() { close(stop); wg.Wait() })
	return out
}

func next(t *testing.T, lines <-chan line) line {
	t.Helper()
	select {
	case l := <-lines:
		return l
	case <-time.After(proctest.Timeout):
		t.Fatal("no child said anything")
	}
	return line{}
}

// startCallers starts one child per entry of counts, on key, and waits
// until every caller has joined its flight, one child fills and the others
// wait for its lock. It returns the children and the index of the filler.
func startCallers(t *testing.T, srv *redistest.Server, key string, lockTTL time.Duration, counts ...int) ([]*proctest.Proc, <-chan line, int) {
	var procs []*proctest.Proc
	for _, n := range counts {
		procs = append(procs, proctest.Start(t, "TestCallerProcess", callerRole,
			fmt.Sprintf("%s|%s|%d|%d", srv.Addr(), key, n, lockTTL.Milliseconds())))
	}
	lines := fanIn(t, procs)
	filler, joined, waiting := -1, 0, 0
	for joined < len(procs) || waiting < len(procs)-1 || filler < 0 {
		l := next(t, lines)
		switch l.text {
		case "JOINED":
			joined++
		case "WAIT":
			waiting++
		case "FILLING":
			require.Less(t, filler, 0, "children %d and %d both fill", filler, l.from)
			filler = l.from
		default:
			t.Fatalf("child %d: unexpected %q", l.from, l.text)
		}
	}
	return procs, lines, filler
}

// done reads the DONE lines of the children in want and returns the
// latencies (µs) they measured; every caller must have got the value.
func done(t *testing.T, lines <-chan line, want map[int]bool, callers int) []int {
	var lat []int
	ok := 0
	for len(want) > 0 {
		l := next(t, lines)
		f := strings.Fields(l.text)
		require.GreaterOrEqual(t, len(f), 3, "child %d: unexpected %q", l.from, l.text)
		require.Equal(t, "DONE", f[0], "child %d: unexpected %q", l.from, l.text)
		require.True(t, want[l.from], "child %d reported twice", l.from)
		delete(want, l.from)
		n, _ := strconv.Atoi(f[1])
		if f[2] != "0" {
			t.Errorf("child %d: %s callers failed", l.from, f[2])
		}
		ok += n
		if len(f) > 3 {
			for _, s := range strings.Split(f[3], ",") {
				us, _ := strconv.Atoi(s)
				lat = append(lat, us)
			}
		}
	}
	assert.Equal(t, callers, ok, "%d callers got the value, want %d", ok, callers)
	return lat
}

func fills(t *testing.T, srv *redistest.Server, key string) int {
	v, err := srv.Do("GET", "fills:"+key)
	require.NoError(t, err)
	n, _ := strconv.Atoi(fmt.Sprint(v))
	return n
}

func quantile(us []int, q float64) time.Duration {
	s := slices.Clone(us)
	slices.Sort(s)
	return time.Duration(s[int(q*float64(len(s)-1))]) * time.Microsecond
}

func finish(t *testing.T, procs []*proctest.Proc) {
	for _, p := range procs {
		p.CloseStdin()
	}
}

// 100 concurrent requests for a cold key from 3 processes run the fill
// once; the latency from the fill's end to each caller's return is logged.
func TestProcessesFillOnce(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	key := "cold:" + t.Name()
	procs, lines, _ := startCallers(t, srv, key, 5*time.Second, 34, 33, 33)
	for _, p := range procs {
		p.Send(t, "GO")
	}
	lat := done(t, lines, map[int]bool{0: true, 1: true, 2: true}, 100)
	finish(t, procs)
	if n := fills(t, srv, key); n != 1 {
		t.Errorf("%d fills across 3 processes, want 1", n)
	}
	t.Logf("latency from fill end to the value, %d callers in 3 processes: p50 %v, p99 %v, max %v",
		len(lat), quantile(lat, 0.5), quantile(lat, 0.99), quantile(lat, 1))
}

// The filling process is SIGKILLed mid-fill: exactly one of the others
// fills once its lock expires, and every surviving caller gets that value.
func TestProcessesKilledFiller(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	key := "cold:" + t.Name()
	procs, lines, filler := startCallers(t, srv, key, 500*time.Millisecond, 34, 33, 33)
	procs[filler].Signal(t, syscall.SIGKILL)
	_ = procs[filler].Wait(t)
	l := next(t, lines)
	require.Equal(t, "FILLING", l.text, "after the kill: child %d said %q, want a successor's FILLING", l.from, l.text)
	require.NotEqual(t, filler, l.from, "after the kill: child %d said %q, want a successor's FILLING", l.from, l.text)
	want := map[int]bool{}
	callers := 0
	for i, p := range procs {
		if i != filler {
			p.Send(t, "GO")
			want[i] = true
			callers += []int{34, 33, 33}[i]
		}
	}
	done(t, lines, want, callers)
	finish(t, procs)
	if n := fills(t, srv, key); n != 2 {
		t.Errorf("%d fills, want 2: the killed one and exactly one successor", n)
	}
}
