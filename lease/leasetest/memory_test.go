package leasetest_test

import (
	"testing"
	"time"

	"github.com/redislock-go/redislock/lease/leasetest"
)

func TestMemory(t *testing.T) {
	t.Parallel()
	leasetest.Run(t, func(t *testing.T) leasetest.Env {
		m := leasetest.NewMemory()
		return leasetest.Env{Locker: m, Store: m, Break: m.Break}
	})
}

func TestMemoryFakeClock(t *testing.T) {
	t.Parallel()
	leasetest.Run(t, func(t *testing.T) leasetest.Env {
		c := leasetest.NewFakeClock(time.Time{})
		m := leasetest.NewMemory(leasetest.WithClock(c))
		return leasetest.Env{Locker: m, Store: m, Break: m.Break, Sleep: c.Advance, Now: c.Now}
	})
}
