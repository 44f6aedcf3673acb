package observe

import (
	"context"
	"errors"
	"log/slog"

	"github.com/redislock-go/redislock/lease"
)

// Logger is the slog adapter: an Observer that logs every event it
// implements a method for to a *slog.Logger. Grants and releases go at
// Debug; losses, failed renewals, stale fences, failed clean-ups and
// servers that can evict lock keys at Warn; node failures and replaced
// subscriptions at Info; always with the key, the fence and, where it
// applies, the hold time or wait, never the token.
type Logger struct{ l *slog.Logger }

// NewLogger returns an Observer logging to l; nil if l is nil.
func NewLogger(l *slog.Logger) *Logger {
	if l == nil {
		return nil
	}
	return &Logger{l}
}

var (
	_ ObtainObserver       = (*Logger)(nil)
	_ RefreshObserver      = (*Logger)(nil)
	_ ReleaseObserver      = (*Logger)(nil)
	_ LossObserver         = (*Logger)(nil)
	_ NodeObserver         = (*Logger)(nil)
	_ SubscriptionObserver = (*Logger)(nil)
	_ CleanupObserver      = (*Logger)(nil)
	_ StaleFenceObserver   = (*Logger)(nil)
	_ EvictionObserver     = (*Logger)(nil)
)

// ObtainStart logs nothing: ObtainDone logs the call.
func (o *Logger) ObtainStart(ctx context.Context, _ ObtainStartEvent) context.Context { return ctx }

// ObtainDone logs a grant, or a call that did not obtain, at Debug.
func (o *Logger) ObtainDone(ctx context.Context, e ObtainDoneEvent) {
	if e.Err != nil {
		o.l.DebugContext(ctx, "redislock: not obtained", "key", e.Key, "outcome", string(e.Outcome()),
			"attempts", e.Attempts, "wait", e.Wait, "err", e.Err)
		return
	}
	o.l.DebugContext(ctx, "redislock: obtained", "key", e.Key, "fence", e.Fence, "ttl", e.TTL,
		"attempts", e.Attempts, "wait", e.Wait)
}

// RefreshStart logs nothing: RefreshDone logs failures.
func (o *Logger) RefreshStart(ctx context.Context, _ RefreshStartEvent) context.Context {
	return ctx
}

// RefreshDone logs a refresh that found the lock gone, or a failed
// renewal, at Warn.
func (o *Logger) RefreshDone(ctx context.Context, e RefreshDoneEvent) {
	switch {
	case e.Err == nil:
	case errors.Is(e.Err, lease.ErrNotHeld):
		o.l.WarnContext(ctx, "redislock: refresh found the lock gone", "key", e.Key, "fence", e.Fence, "renewal", e.Renewal)
	case e.Renewal:
		o.l.WarnContext(ctx, "redislock: renewal failed", "key", e.Key, "fence", e.Fence, "err", e.Err)
	}
}

// ReleaseStart logs nothing: ReleaseDone logs the release.
func (o *Logger) ReleaseStart(ctx context.Context, _ ReleaseStartEvent) context.Context {
	return ctx
}

// ReleaseDone logs a release at Debug, one that failed or found the lock
// gone at Warn.
func (o *Logger) ReleaseDone(ctx context.Context, e ReleaseDoneEvent) {
	switch {
	case e.Err == nil:
		o.l.DebugContext(ctx, "redislock: released", "key", e.Key, "fence", e.Fence, "held", e.Held)
	case errors.Is(e.Err, lease.ErrNotHeld):
		o.l.WarnContext(ctx, "redislock: released a lock no longer held", "key", e.Key, "fence", e.Fence, "held", e.Held)
	default:
		o.l.WarnContext(ctx, "redislock: release failed", "key", e.Key, "fence", e.Fence, "held", e.Held, "err", e.Err)
	}
}

// LockLost logs the loss at Warn.
func (o *Logger) LockLost(ctx context.Context, e LossEvent) {
	o.l.WarnContext(ctx, "redislock: lock lost", "key", e.Key, "fence", e.Fence, "held", e.Held, "cause", e.Cause)
}

// NodeFailed logs the failed call at Info.
func (o *Logger) NodeFailed(ctx context.Context, e NodeEvent) {
	o.l.InfoContext(ctx, "redislock: node call failed", "node", e.Node, "op", e.Op, "err", e.Err)
}

// Resubscribed logs the replaced connection at Info.
func (o *Logger) Resubscribed(e SubscriptionEvent) {
	o.l.Info("redislock: subscription connection replaced", "err", e.Err)
}

// CleanupFailed logs the failed clean-up at Warn.
func (o *Logger) CleanupFailed(ctx context.Context, e CleanupEvent) {
	o.l.WarnContext(ctx, "redislock: background clean-up failed", "key", e.Key, "node", e.Node, "err", e.Err)
}

// EvictionPolicy logs the server that can evict lock keys at Warn.
func (o *Logger) EvictionPolicy(e EvictionEvent) {
	o.l.Warn("redislock: Redis can evict lock keys (maxmemory-policy is not noeviction)",
		"node", e.Node, "addr", e.Addr, "policy", e.Policy, "maxmemory", e.MaxMemory)
}

// StaleFence logs the refused write at Warn.
func (o *Logger) StaleFence(ctx context.Context, e StaleFenceEvent) {
	o.l.WarnContext(ctx, "redislock: stale fence refused", "key", e.Key, "fence", e.Fence, "newest", e.Newest)
}
