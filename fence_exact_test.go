package redislock_test

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
)

// Fences are compared exactly over the whole int64 range, above 2^53 too
// (Lua numbers are doubles): fences minted elsewhere, from nanosecond
// clocks or database sequences, are ordered as integers.
func TestFencesExactAboveDoubles(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(nil)
	c := newClient(t, rdb)
	ctx := ctxT(t, 10*time.Second)
	pairs := [][2]int64{
		{9007199254740993, 9007199254740992}, // 2^53+1, then 2^53
		{1800000000000000100, 1800000000000000001},
		{math.MaxInt64, math.MaxInt64 - 1},
	}
	for i, p := range pairs {
		key := "exact-" + strconv.Itoa(i)
		if err := redislock.FencedSet(ctx, rdb, key, "new", p[0], 0); err != nil {
			t.Fatalf("FencedSet(%d): %v", p[0], err)
		}
		err := redislock.FencedSet(ctx, rdb, key, "old", p[1], 0)
		if !errors.Is(err, redislock.ErrStaleFence) || !strings.Contains(err.Error(), strconv.FormatInt(p[0], 10)) {
			t.Errorf("FencedSet(%d) after %d = %v, want ErrStaleFence naming %d", p[1], p[0], err, p[0])
		}
		if _, f, err := redislock.FencedGet(ctx, rdb, key); err != nil || f != p[0] {
			t.Errorf("FencedGet after %d = %d, %v", p[0], f, err)
		}
		s := c.Store()
		if err := s.Put(ctx, key, []byte("new"), p[0], 0); err != nil {
			t.Fatalf("Store.Put(%d): %v", p[0], err)
		}
		if err := s.Put(ctx, key, []byte("old"), p[1], 0); !errors.Is(err, redislock.ErrStaleFence) {
			t.Errorf("Store.Put(%d) after %d = %v, want ErrStaleFence", p[1], p[0], err)
		}
		if r, err := s.Get(ctx, key); err != nil || r.Fence != p[0] || string(r.Value) != "new" {
			t.Errorf("Store.Get after %d = %+v, %v", p[0], r, err)
		}
		if err := s.Delete(ctx, key, p[1]); !errors.Is(err, redislock.ErrStaleFence) {
			t.Errorf("Store.Delete(%d) after %d = %v, want ErrStaleFence", p[1], p[0], err)
		}
	}
}

// A fence <= 0 is no grant's: every fence check refuses it as invalid.
func TestFenceNotPositiveInvalid(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(nil)
	c := newClient(t, rdb)
	ctx := ctxT(t, 10*time.Second)
	var g redislock.FenceGate
	for _, f := range []int64{0, -1, math.MinInt64} {
		for what, err := range map[string]error{
			"FencedSet":    redislock.FencedSet(ctx, rdb, "np", "v", f, 0),
			"Store.Put":    c.Store().Put(ctx, "np", []byte("v"), f, 0),
			"Store.Delete": c.Store().Delete(ctx, "np", f),
			"FenceGate":    g.Admit(f),
		} {
			if !errors.Is(err, redislock.ErrInvalidArgument) {
				t.Errorf("%s(%d) = %v, want ErrInvalidArgument", what, f, err)
			}
		}
	}
}
