package semaphore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/observe"
	"github.com/redislock-go/redislock/semaphore"
)

// nopObserver observes every semaphore event and does nothing: the cost of
// building and sending them.
type nopObserver struct{}

func (nopObserver) AcquireStart(ctx context.Context, _ observe.AcquireStartEvent) context.Context {
	return ctx
}
func (nopObserver) AcquireDone(context.Context, observe.AcquireDoneEvent) {}
func (nopObserver) PermitRefreshed(context.Context, observe.PermitEvent)  {}
func (nopObserver) PermitReleased(context.Context, observe.PermitEvent)   {}

// The uncontended TryAcquire+Release pair against a redis-server the
// benchmark starts, without observers and with one that does nothing
// (compare with benchstat):
//
//	go test -run '^$' -bench TryAcquireRelease -count 10
func BenchmarkTryAcquireRelease(b *testing.B) {
	srv := redistest.Start(b)
	for _, bc := range []struct {
		name string
		opts []semaphore.Option
	}{
		{"observer=none", nil},
		{"observer=nop", []semaphore.Option{semaphore.WithObserver(nopObserver{})}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s, err := semaphore.New(srv.Client(nil), "bench", 4, bc.opts...)
			require.NoError(b, err)
			defer s.Close()
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				p, err := s.TryAcquire(ctx, time.Minute)
				require.NoError(b, err)
				require.NoError(b, p.Release(ctx))
			}
		})
	}
}
