package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/internal/testkit"
	"github.com/redislock-go/redislock/observe"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// After Release, a lock leaves exactly one key: its released record, with
// a TTL of the lock's TTL, at least the release timeout; plain, fair and
// multi-key locks alike, and no key is ever without expiry.
func TestKeysLeftAfterRelease(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := testkit.Context(t)
		const rt = 300 * time.Millisecond
		c := newClient(t, b.rdb, redislock.WithReleaseTimeout(rt))
		require.Equal(t, rt, redislock.RecordTTL(50*time.Millisecond, rt), "record TTL of a 50 ms lock, want the release timeout")
		require.Equal(t, time.Minute, redislock.RecordTTL(time.Minute, rt), "record TTL of a 1 min lock, want its TTL")
		// left checks the keys in Redis: want of them, each with a TTL in
		// (0, bound]; released: each a released record.
		left := func(how string, want int, bound time.Duration, released bool) {
			t.Helper()
			ks, err := b.rdb.Keys(ctx, "*").Result()
			require.NoError(t, err)
			require.Equal(t, want, len(ks), "%s: keys %q, want %d", how, ks, want)
			for _, k := range ks {
				d := b.rdb.PTTL(ctx, k).Val()
				assert.False(t, d <= 0 || d > bound, "%s: key %q has PTTL %v, want in (0, %v]", how, k, d, bound)
				v := b.rdb.Get(ctx, k).Val()
				assert.False(t, released && !strings.HasPrefix(v, "~:"), "%s: key %q holds %q, want a released record", how, k, v)
			}
		}
		for _, tc := range []struct {
			name  string
			ttl   time.Duration
			bound time.Duration
			opts  []redislock.Option
		}{
			{"plain", 5 * time.Second, 5 * time.Second, nil},
			{"short", 200 * time.Millisecond, rt, nil},
			{"fair", 5 * time.Second, 5 * time.Second, []redislock.Option{redislock.WithFair(true)}},
			{"holder", 5 * time.Second, 5 * time.Second, []redislock.Option{redislock.WithHolder("w:1;*")}},
		} {
			b.rdb.FlushAll(ctx)
			l, err := c.Obtain(ctx, tc.name, tc.ttl, tc.opts...)
			require.NoError(t, err, tc.name)
			left(tc.name+" held", 1, tc.ttl, false)
			require.NoError(t, l.Release(ctx), tc.name)
			left(tc.name+" released", 1, tc.bound, true)
			// The next grant reuses the key: still one.
			l, err = c.Obtain(ctx, tc.name, tc.ttl, tc.opts...)
			require.NoError(t, err, tc.name)
			require.NoError(t, l.Release(ctx), tc.name)
			left(tc.name+" released twice", 1, tc.bound, true)
		}

		b.rdb.FlushAll(ctx)
		m, err := c.ObtainMulti(ctx, []string{"m1", "m2", "m3"}, 5*time.Second)
		require.NoError(t, err)
		require.NoError(t, m.Release(ctx))
		left("multi released", 3, 5*time.Second, true)

		// A released record expires: nothing is left.
		b.rdb.FlushAll(ctx)
		l, err := c.Obtain(ctx, "gone", 200*time.Millisecond)
		require.NoError(t, err)
		require.NoError(t, l.Release(ctx))
		b.elapse(rt + 100*time.Millisecond)
		left("after the record's TTL", 0, 0, true)
	})
}

// soakKeys is what the key-hygiene soak may find left in Redis, by the
// suffix after a key's hash tag, with the longest TTL the docs state
// for it. A key of no kind here, or without expiry, fails the soak. Keep it
// in step with the scripts and docs/how-it-works.md and docs/limitations.md.
var soakKeys = []struct {
	suffix string
	what   string
	bound  time.Duration
}{
	// A lock's only key: its grant (abandoned, never released: the lock's
	// TTL) or its released record (the TTL, at least the release timeout).
	{"", "lock key", max(soakLockTTL, redislock.DefaultReleaseTimeout)},
	{":queue", "fair queue", redislock.DefaultQueueTTL},
	{":qexp", "fair queue deadlines", redislock.DefaultQueueTTL},
	{":rec", "record (Client.Store, the patterns' results)", soakRecordTTL},
}

const (
	soakLockTTL   = 2 * time.Second
	soakRecordTTL = time.Minute
	soakWorkers   = 32 // on a real server
	// soakMiniWorkers is fewer: miniredis runs one script at a time, in
	// Go (instrumented under -race), so 32 callers queue long enough behind
	// each other, on a loaded machine, for one call to outlast the 2 s
	// lease's validity (a call's deadline in single mode).
	soakMiniWorkers = 8
	// soakDefaultKeys is how many distinct keys the soak locks on a real
	// server: REDISLOCK_SOAK_KEYS overrides it.
	soakDefaultKeys = 100_000
)

// TestKeyHygiene takes and releases locks on many distinct keys (plain,
// Run, multi-key, fair with a waiter, records; a few abandoned) and checks
// that every key left has an expiry within its stated bound; on miniredis,
// fast-forwarded past the longest bound, the key count returns to zero.
func TestKeyHygiene(t *testing.T) {
	testkit.SkipShort(t)
	t.Parallel()
	n := soakDefaultKeys
	if s := os.Getenv("REDISLOCK_SOAK_KEYS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n <= 0 {
			require.Fail(t, fmt.Sprintf("REDISLOCK_SOAK_KEYS=%q", s))
		}
	}
	t.Run("redis-server", func(t *testing.T) {
		srv := redistest.Start(t)
		rdb := srv.Client(func(o *redis.Options) { o.PoolSize = 2 * soakWorkers })
		start := time.Now()
		abandoned := soak(t, rdb, n, soakWorkers)
		t.Logf("%d keys in %v", n, time.Since(start).Round(time.Millisecond))
		counts := checkKeys(t, rdb)
		t.Logf("left: %v", counts)
		assert.LessOrEqual(t, counts[""], n, "lock keys left for %d locks: more than one each", n)
		assert.LessOrEqual(t, grants(t, rdb), abandoned, "grants left, %d abandoned", abandoned)
		// The abandoned grants and the released records expire within
		// their bound.
		require.Eventually(t, func() bool { return checkKeys(t, rdb)[""] == 0 }, soakKeys[0].bound+5*time.Second, 5*time.Millisecond, "lock keys expired")
	})
	t.Run("miniredis", func(t *testing.T) {
		m := miniredis.RunT(t)
		rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), PoolSize: 2 * soakMiniWorkers})
		defer rdb.Close()
		soak(t, rdb, min(n, 2000), soakMiniWorkers)
		checkKeys(t, rdb)
		var longest time.Duration
		for _, k := range soakKeys {
			longest = max(longest, k.bound)
		}
		m.FastForward(longest)
		left := m.Keys()
		require.Empty(t, left, "keys left after the longest stated bound (%v)", longest)
	})
}

// soak runs the workload on n keys with workers callers and returns how
// many locks it abandoned.
func soak(t *testing.T, rdb *redis.Client, n, workers int) (abandoned int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	waits := &waitSignals{}
	c := newClient(t, rdb, redislock.WithObserver(waits))
	jobs := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				left, err := soakOne(ctx, c, waits, i)
				if err != nil {
					errs <- fmt.Errorf("key %d: %w", i, err)
					return
				}
				if left {
					mu.Lock()
					abandoned++
					mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		select {
		case jobs <- i:
		case err := <-errs:
			close(jobs)
			wg.Wait()
			require.NoError(t, err)
		}
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errs:
		require.NoError(t, err)
	default:
	}
	return abandoned
}

// soakOne does job i on its own key and reports whether it abandoned a
// lock.
func soakOne(ctx context.Context, c *redislock.Client, waits *waitSignals, i int) (abandoned bool, err error) {
	key := "soak-" + strconv.Itoa(i)
	switch i % 10 {
	case 6:
		return false, c.Run(ctx, key, soakLockTTL, func(context.Context, *redislock.Lock) error { return nil })
	case 7:
		m, err := c.ObtainMulti(ctx, []string{key + "-a", key + "-b"}, soakLockTTL)
		if err != nil {
			return false, err
		}
		return false, m.Release(ctx)
	case 8:
		return false, soakFair(ctx, c, waits, key, i%100 == 8)
	case 9:
		st := c.Store()
		if err := st.Put(ctx, key, []byte("v"), 1, soakRecordTTL); err != nil {
			return false, err
		}
		if i%50 == 9 {
			return false, st.Delete(ctx, key, 1)
		}
		return false, nil
	}
	l, err := c.Obtain(ctx, key, soakLockTTL)
	if err != nil {
		return false, err
	}
	if i%1000 == 0 {
		return true, nil // its holder "crashed"
	}
	return false, l.Release(ctx)
}

// soakFair takes a fair lock; contended, a second caller queues behind the
// holder and gets the lock after its release.
func soakFair(ctx context.Context, c *redislock.Client, waits *waitSignals, key string, contended bool) error {
	l, err := c.Obtain(ctx, key, soakLockTTL, redislock.WithFair(true))
	if err != nil || !contended {
		if err == nil {
			err = l.Release(ctx)
		}
		return err
	}
	waiting := waits.expect(key)
	got := make(chan error, 1)
	go func() {
		w, err := c.Obtain(ctx, key, soakLockTTL, redislock.WithFair(true), redislock.WithRetry(redislock.LinearBackoff(5*time.Millisecond)))
		if err == nil {
			err = w.Release(ctx)
		}
		got <- err
	}()
	// Release once the waiter queued (its first attempt found the lock held).
	select {
	case <-waiting:
	case err := <-got:
		return fmt.Errorf("the waiter returned without waiting: %w", err)
	}
	if err := l.Release(ctx); err != nil {
		return err
	}
	return <-got
}

// grants counts the lock keys that hold a grant (not a released record).
func grants(t *testing.T, rdb *redis.Client) int {
	t.Helper()
	ctx := context.Background()
	n := 0
	iter := rdb.Scan(ctx, 0, redislock.DefaultPrefix+"{*}", 1000).Iterator()
	for iter.Next(ctx) {
		if held(ctx, rdb, iter.Val()) {
			n++
		}
	}
	require.NoError(t, iter.Err())
	return n
}

// checkKeys scans every key: each must be of a kind of soakKeys, with an
// expiry within its bound. It returns the count per suffix.
func checkKeys(t *testing.T, rdb *redis.Client) map[string]int {
	t.Helper()
	ctx := context.Background()
	counts := map[string]int{}
	iter := rdb.Scan(ctx, 0, "*", 1000).Iterator()
	var batch []string
	flush := func() {
		pipe := rdb.Pipeline()
		ttls := make([]*redis.DurationCmd, len(batch))
		for i, k := range batch {
			ttls[i] = pipe.PTTL(ctx, k)
		}
		if _, err := pipe.Exec(ctx); !errors.Is(err, redis.Nil) {
			require.NoError(t, err)
		}
		for i, k := range batch {
			checkKey(t, k, ttls[i].Val(), counts)
		}
		batch = batch[:0]
	}
	for iter.Next(ctx) {
		if batch = append(batch, iter.Val()); len(batch) == 1000 {
			flush()
		}
	}
	require.NoError(t, iter.Err())
	flush()
	return counts
}

func checkKey(t *testing.T, key string, ttl time.Duration, counts map[string]int) {
	t.Helper()
	end := strings.LastIndexByte(key, '}')
	require.True(t, strings.HasPrefix(key, redislock.DefaultPrefix+"{"), "key %q is not of redislock", key)
	require.GreaterOrEqual(t, end, 0, "key %q is not of redislock", key)
	suffix := key[end+1:]
	for _, k := range soakKeys {
		if k.suffix != suffix {
			continue
		}
		switch {
		case ttl == -2: // expired between SCAN and PTTL
		case ttl < 0:
			require.Fail(t, fmt.Sprintf("%s %q has no expiry (PTTL %v)", k.what, key, ttl))
		case ttl > k.bound:
			require.Fail(t, fmt.Sprintf("%s %q has PTTL %v, above its bound %v", k.what, key, ttl, k.bound))
		}
		counts[suffix]++
		return
	}
	require.Fail(t, fmt.Sprintf("key %q (suffix %q) is of no kind the docs name", key, suffix))
}

// waitSignals is a WaitObserver that tells, per key, when a caller starts
// to wait for it (expect, then receive).
type waitSignals struct{ m sync.Map } // key: chan struct{}

// expect returns a channel closed when a caller next starts to wait for
// key.
func (w *waitSignals) expect(key string) <-chan struct{} {
	ch := make(chan struct{})
	w.m.Store(key, ch)
	return ch
}

func (w *waitSignals) WaitStart(_ context.Context, e observe.WaitEvent) {
	if ch, ok := w.m.LoadAndDelete(e.Key); ok {
		close(ch.(chan struct{}))
	}
}
