package observe_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/observe"
)

type obtains struct{ n int }

func (o *obtains) ObtainStart(ctx context.Context, _ observe.ObtainStartEvent) context.Context {
	return ctx
}
func (o *obtains) ObtainDone(context.Context, observe.ObtainDoneEvent) { o.n++ }

type losses struct{}

func (losses) LockLost(context.Context, observe.LossEvent) {}

func TestSelect(t *testing.T) {
	t.Parallel()
	a, b := &obtains{}, &obtains{}
	list := []observe.Observer{a, losses{}, b, "not an observer"}
	got := observe.Select[observe.ObtainObserver](list)
	require.Len(t, got, 2, "Select(ObtainObserver) = %v, want [a b] in list order", got)
	require.False(t, got[0] != a, "Select(ObtainObserver) = %v, want [a b] in list order", got)
	require.False(t, got[1] != b, "Select(ObtainObserver) = %v, want [a b] in list order", got)
	if got := observe.Select[observe.LossObserver](list); len(got) != 1 {
		t.Fatalf("Select(LossObserver) = %v, want one", got)
	}
	if got := observe.Select[observe.NodeObserver](list); got != nil {
		t.Fatalf("Select(NodeObserver) = %v, want nil: no event is built for it", got)
	}
}

func TestOutcome(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  error
		want observe.Outcome
	}{
		{nil, observe.Obtained},
		{fmt.Errorf("%w: %w", lease.ErrNotObtained, context.DeadlineExceeded), observe.Contended},
		{&lease.WaitLimitError{Err: lease.ErrNotObtained}, observe.Contended},
		{errors.New("connection refused"), observe.Failed},
	} {
		if got := (observe.ObtainDoneEvent{Err: c.err}).Outcome(); got != c.want {
			t.Errorf("Outcome of %v = %q, want %q", c.err, got, c.want)
		}
	}
}

func TestLogger(t *testing.T) {
	t.Parallel()
	require.False(t, observe.NewLogger(nil) != nil, "NewLogger(nil) is not nil")
	var buf bytes.Buffer
	l := observe.NewLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	ctx := context.Background()
	l.ObtainDone(ctx, observe.ObtainDoneEvent{Key: "k", Fence: 7})
	l.LockLost(ctx, observe.LossEvent{Key: "k", Fence: 7, Cause: lease.ErrLeaseExpired})
	l.RefreshDone(ctx, observe.RefreshDoneEvent{Key: "k", Fence: 7, Err: lease.ErrNotHeld})
	out := buf.String()
	for _, want := range []string{
		`level=DEBUG msg="redislock: obtained" key=k fence=7`,
		`level=WARN msg="redislock: lock lost" key=k fence=7`,
		`level=WARN msg="redislock: refresh found the lock gone" key=k fence=7`,
	} {
		assert.True(t, strings.Contains(out, want), "log lacks %q:\n%s", want, out)
	}
}
