package redislock

import (
	"context"
	"log/slog"
)

// observers dispatches events to a Client's Observers, sorted by the
// interfaces they implement once, in New. A Client without observers has a
// nil *observers, and every event site checks for that before it builds an
// event.
type observers struct {
	obtain  []ObtainObserver
	wait    []WaitObserver
	refresh []RefreshObserver
	release []ReleaseObserver
	loss    []LossObserver
	node    []NodeObserver
	sub     []SubscriptionObserver
	cleanup []CleanupObserver
	stale   []StaleFenceObserver
}

func newObservers(list []Observer, logger *slog.Logger) *observers {
	if logger != nil {
		list = append(list, logObserver{logger})
	}
	if len(list) == 0 {
		return nil
	}
	o := &observers{}
	for _, v := range list {
		if x, ok := v.(ObtainObserver); ok {
			o.obtain = append(o.obtain, x)
		}
		if x, ok := v.(WaitObserver); ok {
			o.wait = append(o.wait, x)
		}
		if x, ok := v.(RefreshObserver); ok {
			o.refresh = append(o.refresh, x)
		}
		if x, ok := v.(ReleaseObserver); ok {
			o.release = append(o.release, x)
		}
		if x, ok := v.(LossObserver); ok {
			o.loss = append(o.loss, x)
		}
		if x, ok := v.(NodeObserver); ok {
			o.node = append(o.node, x)
		}
		if x, ok := v.(SubscriptionObserver); ok {
			o.sub = append(o.sub, x)
		}
		if x, ok := v.(CleanupObserver); ok {
			o.cleanup = append(o.cleanup, x)
		}
		if x, ok := v.(StaleFenceObserver); ok {
			o.stale = append(o.stale, x)
		}
	}
	return o
}

func (o *observers) obtainStart(ctx context.Context, e ObtainStartEvent) context.Context {
	for _, x := range o.obtain {
		ctx = x.ObtainStart(ctx, e)
	}
	return ctx
}

func (o *observers) obtainDone(ctx context.Context, e ObtainDoneEvent) {
	for _, x := range o.obtain {
		x.ObtainDone(ctx, e)
	}
}

func (o *observers) waitStart(ctx context.Context, e WaitEvent) {
	for _, x := range o.wait {
		x.WaitStart(ctx, e)
	}
}

func (o *observers) refreshStart(ctx context.Context, e RefreshStartEvent) context.Context {
	for _, x := range o.refresh {
		ctx = x.RefreshStart(ctx, e)
	}
	return ctx
}

func (o *observers) refreshDone(ctx context.Context, e RefreshDoneEvent) {
	for _, x := range o.refresh {
		x.RefreshDone(ctx, e)
	}
}

func (o *observers) releaseStart(ctx context.Context, e ReleaseStartEvent) context.Context {
	for _, x := range o.release {
		ctx = x.ReleaseStart(ctx, e)
	}
	return ctx
}

func (o *observers) releaseDone(ctx context.Context, e ReleaseDoneEvent) {
	for _, x := range o.release {
		x.ReleaseDone(ctx, e)
	}
}

func (o *observers) lockLost(ctx context.Context, e LossEvent) {
	for _, x := range o.loss {
		x.LockLost(ctx, e)
	}
}

func (o *observers) nodeFailed(ctx context.Context, e NodeEvent) {
	for _, x := range o.node {
		x.NodeFailed(ctx, e)
	}
}

func (o *observers) resubscribed(e SubscriptionEvent) {
	for _, x := range o.sub {
		x.Resubscribed(e)
	}
}

func (o *observers) staleFence(ctx context.Context, e StaleFenceEvent) {
	for _, x := range o.stale {
		x.StaleFence(ctx, e)
	}
}

// cleanupFailed tells the observers that the clean-up of l on node failed.
func (c *Client) cleanupFailed(ctx context.Context, l *Lock, node int, err error) {
	if c.obs != nil {
		for _, x := range c.obs.cleanup {
			x.CleanupFailed(ctx, CleanupEvent{Key: l.key, Node: node, Err: err})
		}
	}
}
