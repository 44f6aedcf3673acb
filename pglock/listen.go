package pglock

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// listener is a Client's listening connection for notified waiting: one
// session connection, LISTEN on the table's channel, started at the first
// wait and stopped by Close; it reconnects with a backoff while the Client
// is open. Waiters register by key; a notification wakes the waiters of its
// key, a (re)connection wakes every waiter (notifications may have been
// missed while it was down). A notification wakes the Client's
// longest-waiting waiter of the key only: one attempt per release instead
// of a herd; the others keep their backoff and their place, and the woken
// one, if it loses the lock to another client, waits again at the front.
// While it is down, waiters sleep their backoff.
type listener struct {
	c *Client

	mu      sync.Mutex
	up      bool                 // LISTEN is in effect
	waiters map[string][]*waiter // by payload of the key, oldest first
}

// waiter is one Obtain call waiting for a key's release.
type waiter struct {
	l  *listener
	id string
	ch chan struct{} // buffered: a wake-up is never lost between waits
}

// listenBackoff bounds the pause between reconnections of the listener.
const (
	listenBackoffMin = 50 * time.Millisecond
	listenBackoffMax = 5 * time.Second
)

// canListen reports whether notified waiting is possible: not through a
// transaction pooler without a session config.
func (c *Client) canListen() bool { return !c.opts.txPooler || c.opts.sessionConf != nil }

// payload is what a release of key sends: the SHA-256 (hex) of the key,
// which fits NOTIFY's 8000 bytes whatever the key (the release statement
// computes the same on the server).
func payload(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// waitFor registers a waiter for key, starting the listener if needed. It
// returns nil when the Client is closed (the caller then sleeps its
// backoff: a nil *waiter's wait does that).
func (c *Client) waitFor(key string) *waiter {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	l := c.listener
	if l == nil {
		l = &listener{c: c, waiters: map[string][]*waiter{}}
		c.listener = l
		c.bg.Add(1)
		go func() {
			defer c.bg.Done()
			l.run(c.ctx)
		}()
	}
	c.mu.Unlock()
	w := &waiter{l: l, id: payload(key), ch: make(chan struct{}, 1)}
	l.mu.Lock()
	l.waiters[w.id] = append(l.waiters[w.id], w)
	l.mu.Unlock()
	return w
}

// stop unregisters w; nil-safe.
func (w *waiter) stop() {
	if w == nil {
		return
	}
	l := w.l
	l.mu.Lock()
	ws := slices.DeleteFunc(l.waiters[w.id], func(x *waiter) bool { return x == w })
	if len(ws) == 0 {
		delete(l.waiters, w.id)
	} else {
		l.waiters[w.id] = ws
	}
	l.mu.Unlock()
}

// sleep returns after d or with ctx's error.
func sleep(ctx context.Context, d time.Duration) error { return (*waiter)(nil).wait(ctx, d) }

// wait returns after d, a notification for w's key, or with ctx's error.
// A nil waiter only sleeps.
func (w *waiter) wait(ctx context.Context, d time.Duration) error {
	var wake chan struct{}
	if w != nil {
		wake = w.ch
		if h := w.l.c.testHookWait; h != nil {
			h(w.l.isUp())
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-wake:
	case <-t.C:
	}
	return nil
}

func (l *listener) isUp() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.up
}

// wake wakes the longest-waiting waiter of id, or every waiter for id ==
// "".
func (l *listener) wake(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for key, ws := range l.waiters {
		if id != "" && key != id || len(ws) == 0 {
			continue
		}
		if id != "" {
			ws = ws[:1]
		}
		for _, w := range ws {
			select {
			case w.ch <- struct{}{}:
			default:
			}
		}
	}
}

func (l *listener) setUp(up bool) {
	l.mu.Lock()
	l.up = up
	l.mu.Unlock()
}

// run keeps the listening connection until ctx ends.
func (l *listener) run(ctx context.Context) {
	backoff := listenBackoffMin
	for ctx.Err() == nil {
		if l.listen(ctx) {
			backoff = listenBackoffMin
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		backoff = min(2*backoff, listenBackoffMax)
	}
}

// listen connects, LISTENs and dispatches notifications until the
// connection fails or ctx ends; it reports whether LISTEN took effect.
func (l *listener) listen(ctx context.Context) bool {
	conn, err := l.c.sessionConn(ctx)
	if err != nil {
		return false
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.c.n.channel}.Sanitize()); err != nil {
		return false
	}
	l.setUp(true)
	defer l.setUp(false)
	l.wake("") // releases while it was down were not heard
	if h := l.c.testHookListen; h != nil {
		h(conn.PgConn().PID())
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true
		}
		l.wake(n.Payload)
	}
}

// sessionConn opens a connection of its own (not from the pool): with the
// session config (WithSessionConfig) or the pool's connection config.
func (c *Client) sessionConn(ctx context.Context) (*pgx.Conn, error) {
	cfg := c.opts.sessionConf
	if cfg == nil {
		cfg = c.pool.Config().ConnConfig
	}
	return pgx.ConnectConfig(ctx, cfg.Copy())
}
