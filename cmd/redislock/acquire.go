package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/observe"
	"github.com/redislock-go/redislock/semaphore"
)

// An acquirer takes what run holds: the lock on a key, or one slot of the
// semaphore named by the key (--slots).
type acquirer interface {
	// acquire makes one attempt (try) or waits until ctx ends.
	acquire(ctx context.Context, ttl time.Duration, try bool) (lease.Lock, error)
	// heldBy says who holds it, for messages.
	heldBy() string
	// env is what the command's environment gets besides key, fence and token.
	env(l lease.Lock) []string
	close()
}

// lockAcquirer takes the lock of the library's Client.
type lockAcquirer struct {
	lc          *redislock.Client
	key         string
	closeClient func()
}

func (a *lockAcquirer) acquire(ctx context.Context, ttl time.Duration, try bool) (lease.Lock, error) {
	var opts []redislock.Option
	if !try {
		opts = append(opts, redislock.WithRetry(redislock.ExponentialBackoff(10*time.Millisecond, time.Second)))
		if _, ok := ctx.Deadline(); !ok {
			opts = append(opts, redislock.WithMaxWait(time.Hour)) // and run's loop tries again
		}
	}
	l, err := a.lc.Obtain(ctx, a.key, ttl, opts...)
	if err != nil {
		return nil, err
	}
	return l, nil
}

func (a *lockAcquirer) heldBy() string          { return heldBy(a.lc, a.key) }
func (a *lockAcquirer) env(lease.Lock) []string { return nil }
func (a *lockAcquirer) close()                  { a.closeClient() }

// heldBy says who holds key, for messages: "held by H (fence F, T left)".
func heldBy(lc *redislock.Client, key string) string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	info, err := lc.Inspect(ctx, key)
	switch {
	case err != nil:
		return fmt.Sprintf("held (holder unknown: %v)", err)
	case !info.Held:
		return "released just now"
	case info.Holder == "":
		return fmt.Sprintf("held (no holder recorded; fence %d, %v left)", info.Fence, info.TTL.Round(time.Millisecond))
	}
	return fmt.Sprintf("held by %s (fence %d, %v left)", info.Holder, info.Fence, info.TTL.Round(time.Millisecond))
}

// envSlot names the slot of a semaphore permit in the command's
// environment (--slots).
const envSlot = "REDISLOCK_SLOT"

// semAcquirer takes a slot of a semaphore.
type semAcquirer struct {
	sem         *semaphore.Semaphore
	notice      waitNotice // told when an Acquire has to wait
	closeClient func()
}

// newSemAcquirer takes slots of the semaphore key under the locks' prefix:
// a semaphore's keys never meet a lock's.
func newSemAcquirer(rdb redis.UniversalClient, key string, n int, holder, prefix string, notice waitNotice) (*semAcquirer, error) {
	sem, err := semaphore.New(rdb, key, n, semaphore.WithHolder(holder), semaphore.WithPrefix(prefix))
	if err != nil {
		return nil, err
	}
	return &semAcquirer{sem: sem, notice: notice}, nil
}

func (a *semAcquirer) acquire(ctx context.Context, ttl time.Duration, try bool) (lease.Lock, error) {
	// One attempt first: when it finds every slot held, say so (the
	// semaphore has no wait event of its own), then queue.
	p, err := a.sem.TryAcquire(ctx, ttl)
	if !try && errors.Is(err, lease.ErrNotObtained) && ctx.Err() == nil {
		a.notice.WaitStart(ctx, observe.WaitEvent{})
		p, err = a.sem.Acquire(ctx, ttl)
	}
	if err != nil {
		return nil, err
	}
	return p, nil
}

func (a *semAcquirer) heldBy() string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	info, err := a.sem.Inspect(ctx)
	if err != nil {
		return fmt.Sprintf("full (holders unknown: %v)", err)
	}
	holders := make([]string, 0, len(info.Holders))
	for _, h := range info.Holders {
		who := h.Holder
		if who == "" {
			who = "?"
		}
		holders = append(holders, fmt.Sprintf("%d:%s", h.Slot, who))
	}
	return fmt.Sprintf("%d of %d slots held (%s), %d waiting", len(info.Holders), a.sem.Limit(), strings.Join(holders, " "), info.Waiters)
}

func (a *semAcquirer) env(l lease.Lock) []string {
	if p, ok := l.(*semaphore.Permit); ok {
		return []string{fmt.Sprintf("%s=%d", envSlot, p.Slot())}
	}
	return nil
}

func (a *semAcquirer) close() {
	_ = a.sem.Close()
	a.closeClient()
}
