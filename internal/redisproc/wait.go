package redisproc

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// DefaultWait bounds each wait of a Cluster or Sentinel for a state
// (formed, healthy, failed over) when the caller's ctx has no deadline.
const DefaultWait = 30 * time.Second

// poll calls check every pollEvery until it returns true, ctx ends or
// DefaultWait passes (when ctx has no deadline). The error names what it
// waited for and the last reason check gave for not being done.
func poll(ctx context.Context, what string, check func(ctx context.Context) (bool, string)) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultWait)
		defer cancel()
	}
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	start := time.Now()
	for {
		done, why := check(ctx)
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redisproc: %s: not reached after %v (%s): %w", what, time.Since(start).Round(time.Millisecond), why, ctx.Err())
		case <-tick.C:
		}
	}
}

// infoField returns the value of field in an INFO reply ("name:value"
// lines), or "".
func infoField(info, field string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// do runs a command bounded by a short timeout of its own under ctx.
func do(ctx context.Context, s *Server, args ...any) (any, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return s.Do(ctx, args...)
}

// doString runs a command whose reply is a string (INFO, CLUSTER NODES).
func doString(ctx context.Context, s *Server, args ...any) (string, error) {
	v, err := do(ctx, s, args...)
	if err != nil {
		return "", err
	}
	str, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("redisproc: %v: reply %T, want a string", args, v)
	}
	return str, nil
}

// logs quotes the log tails of servers, for an error message.
func logs(servers []*Server) string {
	var b strings.Builder
	for _, s := range servers {
		fmt.Fprintf(&b, "\n--- %s (%s):\n%s", s.Addr(), s.Dir(), s.Log())
	}
	return b.String()
}
