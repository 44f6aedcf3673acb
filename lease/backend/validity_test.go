package backend

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/redislock-go/redislock/lease"
)

// Every TTL CheckTTL accepts gives a ValidUntil that keeps the start's
// monotonic clock reading; the TTLs beyond lease.MaxTTL, whose validity
// could reach past 2157 where time.Time keeps none, are refused.
func TestMaxTTL(t *testing.T) {
	t.Parallel()
	monotonic := func(tm time.Time) bool { return strings.Contains(tm.String(), " m=+") }
	for _, ttl := range []time.Duration{time.Second, lease.MaxTTL - time.Millisecond, lease.MaxTTL} {
		assert.NoError(t, CheckTTL(ttl, lease.DefaultDriftFactor), "CheckTTL(%v)", ttl)
		for _, factor := range []float64{0, lease.DefaultDriftFactor} {
			vu := ValidUntil(time.Now(), ttl, factor)
			assert.True(t, monotonic(vu), "ValidUntil for %v, factor %v: %v", ttl, factor, vu)
		}
	}
	for _, ttl := range []time.Duration{lease.MaxTTL + time.Millisecond, 150 * 365 * 24 * time.Hour, math.MaxInt64} {
		err := CheckTTL(ttl, lease.DefaultDriftFactor)
		assert.ErrorIs(t, err, lease.ErrInvalidArgument, "CheckTTL(%v)", ttl)
		assert.ErrorContains(t, err, "lease.MaxTTL")
	}
}
