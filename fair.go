package redislock

import (
	"context"
	"time"
)

func (c *Client) obtainFair(ctx context.Context, l *Lock, ttl time.Duration) error {
	return c.obtainSingle(ctx, l, ttl)
}
