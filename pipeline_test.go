package redislock

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redislock-go/redislock/internal/redistest"
)

// TestAutoPipeline: with many calls in flight the Client batches them through
// go-redis' AutoPipeliner (unless WithAutoPipeline(false)), and every grant,
// fence and release is still right; a lone caller never uses it.
func TestAutoPipeline(t *testing.T) {
	if !redistest.Available(t) {
		return
	}
	srv := redistest.Start(t)
	for _, on := range []bool{true, false} {
		t.Run("on="+strconv.FormatBool(on), func(t *testing.T) {
			c := New(srv.Client(nil), WithAutoPipeline(on))
			defer c.Close()
			ctx := context.Background()
			lone, err := c.Obtain(ctx, "lone", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if err := lone.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if c.pipes[0].ap != nil {
				t.Fatal("a lone call set up auto-pipelining")
			}
			var wg sync.WaitGroup
			for w := range 64 {
				wg.Go(func() {
					key := "ap-" + strconv.FormatBool(on) + "-" + strconv.Itoa(w)
					var last int64
					for range 50 {
						l, err := c.Obtain(ctx, key, time.Minute)
						if err != nil {
							t.Error(err)
							return
						}
						if l.Fence() <= last {
							t.Errorf("fence %d after %d", l.Fence(), last)
						}
						last = l.Fence()
						if err := l.Release(ctx); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			if used := c.pipes[0].ap != nil; used != on {
				t.Fatalf("auto-pipeliner in use: %v, want %v", used, on)
			}
		})
	}
}
