package pglock

import "github.com/redislock-go/redislock/lease"

// WithClock sets the Client's clock: tests give it one with an offset.
func WithClock(c lease.Clock) ClientOption { return withClock(c) }

// SetTestHooks sets the hooks called before each notified wait (whether the
// listener is up) and when the listener's LISTEN took effect (its backend
// pid). Set them before the Client is used.
func SetTestHooks(c *Client, wait func(listening bool), listen func(pid uint32)) {
	c.testHookWait, c.testHookListen = wait, listen
}

// MigrateLockID is the transaction advisory lock that serializes
// migrations.
const MigrateLockID = migrateLockID
