package redislock

import (
	"context"
	"errors"
	"log/slog"
)

// logObserver is the Observer of WithLogger.
type logObserver struct{ l *slog.Logger }

var (
	_ ObtainObserver       = logObserver{}
	_ RefreshObserver      = logObserver{}
	_ ReleaseObserver      = logObserver{}
	_ LossObserver         = logObserver{}
	_ NodeObserver         = logObserver{}
	_ SubscriptionObserver = logObserver{}
	_ CleanupObserver      = logObserver{}
	_ StaleFenceObserver   = logObserver{}
)

func (o logObserver) ObtainStart(ctx context.Context, _ ObtainStartEvent) context.Context { return ctx }

func (o logObserver) ObtainDone(ctx context.Context, e ObtainDoneEvent) {
	if e.Err != nil {
		o.l.DebugContext(ctx, "redislock: not obtained", "key", e.Key, "outcome", string(e.Outcome()),
			"attempts", e.Attempts, "wait", e.Wait, "err", e.Err)
		return
	}
	o.l.DebugContext(ctx, "redislock: obtained", "key", e.Key, "fence", e.Fence, "ttl", e.TTL,
		"attempts", e.Attempts, "wait", e.Wait)
}

func (o logObserver) RefreshStart(ctx context.Context, _ RefreshStartEvent) context.Context {
	return ctx
}

func (o logObserver) RefreshDone(ctx context.Context, e RefreshDoneEvent) {
	switch {
	case e.Err == nil:
	case errors.Is(e.Err, ErrNotHeld):
		o.l.WarnContext(ctx, "redislock: refresh found the lock gone", "key", e.Key, "fence", e.Fence, "renewal", e.Renewal)
	case e.Renewal:
		o.l.WarnContext(ctx, "redislock: renewal failed", "key", e.Key, "fence", e.Fence, "err", e.Err)
	}
}

func (o logObserver) ReleaseStart(ctx context.Context, _ ReleaseStartEvent) context.Context {
	return ctx
}

func (o logObserver) ReleaseDone(ctx context.Context, e ReleaseDoneEvent) {
	switch {
	case e.Err == nil:
		o.l.DebugContext(ctx, "redislock: released", "key", e.Key, "fence", e.Fence, "held", e.Held)
	case errors.Is(e.Err, ErrNotHeld):
		o.l.WarnContext(ctx, "redislock: released a lock no longer held", "key", e.Key, "fence", e.Fence, "held", e.Held)
	default:
		o.l.WarnContext(ctx, "redislock: release failed", "key", e.Key, "fence", e.Fence, "held", e.Held, "err", e.Err)
	}
}

func (o logObserver) LockLost(ctx context.Context, e LossEvent) {
	o.l.WarnContext(ctx, "redislock: lock lost", "key", e.Key, "fence", e.Fence, "held", e.Held, "cause", e.Cause)
}

func (o logObserver) NodeFailed(ctx context.Context, e NodeEvent) {
	o.l.InfoContext(ctx, "redislock: node call failed", "node", e.Node, "op", e.Op, "err", e.Err)
}

func (o logObserver) Resubscribed(e SubscriptionEvent) {
	o.l.Info("redislock: subscription connection replaced", "err", e.Err)
}

func (o logObserver) CleanupFailed(ctx context.Context, e CleanupEvent) {
	o.l.WarnContext(ctx, "redislock: background clean-up failed", "key", e.Key, "node", e.Node, "err", e.Err)
}

func (o logObserver) StaleFence(ctx context.Context, e StaleFenceEvent) {
	o.l.WarnContext(ctx, "redislock: stale fence refused", "key", e.Key, "fence", e.Fence, "newest", e.Newest)
}
