package lockbench

import (
	"context"
	"time"
)

// ManualRenew is the renewal loop a user of a library without auto-renewal
// writes: refresh every ttl/3 while fn runs, cancel fn's ctx when a refresh
// fails, release at the end. Peer adapters use it to implement Renewer.
func ManualRenew(ctx context.Context, ttl time.Duration, refresh, release func(context.Context) error, fn func(context.Context) error) error {
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		tk := time.NewTicker(ttl / 3)
		defer tk.Stop()
		for {
			select {
			case <-fctx.Done():
				return
			case <-tk.C:
				if err := refresh(fctx); err != nil {
					cancel()
					return
				}
			}
		}
	}()
	err := fn(fctx)
	cancel()
	<-done
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer rcancel()
	if rerr := release(rctx); err == nil && ctx.Err() == nil {
		err = rerr
	}
	return err
}
