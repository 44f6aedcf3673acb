package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/script"
)

// dropConn drops the next reply once armed: it reads the reply (so the
// server has run the command), closes the connection and reports EOF, as a
// connection cut right after the server answered would.
type dropConn struct {
	net.Conn
	armed *atomic.Bool
	then  func() // runs after the reply was dropped, before the client sees EOF
}

func (c dropConn) Read(b []byte) (int, error) {
	if c.armed.CompareAndSwap(true, false) {
		_, _ = c.Conn.Read(b)
		_ = c.Conn.Close()
		if c.then != nil {
			c.then()
		}
		return 0, io.EOF
	}
	return c.Conn.Read(b)
}

// Regression test for a core bug the porcupine checker found under kill -9
// and restart (TestClaimSingleRestartAOF): when the reply to Release is lost
// after the server ran the release script, go-redis re-sends the command
// (MaxRetries, default 3); the retry found the key gone and Release returned
// ErrNotHeld, although this very Release had deleted the caller's lock.
// Fixed in the core by release.lua answering a replay as released.
func TestReleaseReplayAfterLostReply(t *testing.T) {
	needRedis(t)
	releaseReplay(t, false)
}

// Regression test for the second half of the same bug, also found by the
// porcupine checker (TestClaimSingleStallsAndNetwork, under reset-peer): the
// first fix kept the replay tombstone in the fence counter key, which the
// next grant overwrote, so when another client obtained the lock between the
// lost reply and go-redis' re-send, Release again answered ErrNotHeld for a
// lock it had deleted. Fixed in the core by keeping the last releases'
// tokens across grants.
func TestReleaseReplayAfterAnotherGrant(t *testing.T) {
	needRedis(t)
	releaseReplay(t, true)
}

// releaseReplay drops the reply to a Release that ran on the server; with
// interleave, another client obtains the lock before go-redis re-sends it.
func releaseReplay(t *testing.T, interleave bool) {
	n := startNodes(t, 1)[0]
	other := singleClient(t, n)
	var then func()
	var otherLock *redislock.Lock
	if interleave {
		then = func() {
			var err error
			otherLock, err = other.Obtain(context.Background(), "replay", 10*time.Second)
			assert.NoError(t, err, "the other client could not obtain the freed lock")
		}
	}
	var armed atomic.Bool
	o := ClientOptions(n.srv.Addr())
	o.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return dropConn{Conn: c, armed: &armed, then: then}, nil
	}
	rdb := redis.NewClient(o) // MaxRetries: go-redis default (3)
	defer rdb.Close()
	c := redislock.New(rdb)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	warm, err := c.Obtain(ctx, "warm", 10*time.Second) // loads the scripts, so EVALSHA runs them
	require.NoError(t, err)
	require.NoError(t, warm.Release(ctx))
	l, err := c.Obtain(ctx, "replay", 10*time.Second)
	require.NoError(t, err)
	armed.Store(true)
	err = l.Release(ctx)
	if v, _ := n.srv.Do("GET", lockKey("replay")); !interleave && !lockValue(fmt.Sprint(v)).Released || interleave && (otherLock == nil || lockValue(fmt.Sprint(v)).Token != otherLock.Token() || lockValue(fmt.Sprint(v)).Fence != otherLock.Fence()) {
		t.Fatalf("the case was not set up: lock key holds %v", v)
	}
	t.Logf("Release after a lost reply: %v", err)
	if otherLock != nil {
		defer otherLock.Release(context.Background())
	}
	assert.False(t, errors.Is(err, redislock.ErrNotHeld), "Release deleted its own lock but returned ErrNotHeld (%v): a lost reply retried by go-redis is misreported as a lost lock", err)
}

// lockValue decodes a lock key's value as the scripts do; the zero Value
// for one they do not write.
func lockValue(v string) script.Value {
	val, _ := script.ParseValue(v)
	return val
}
