package redislock_test

import (
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
)

// holdProxy forwards loopback TCP connections to a Redis server. While
// held, it keeps the server's replies back (the requests go through, so
// Redis runs them) until Let; it reports when a request passed while held.
type holdProxy struct {
	ln     net.Listener
	target string
	sent   chan time.Time // a request passed while held, at that time

	mu    sync.Mutex
	held  bool
	let   chan struct{} // closed by Let
	conns []net.Conn
	wg    sync.WaitGroup
}

func startHoldProxy(t *testing.T, target string) *holdProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &holdProxy{ln: ln, target: target, sent: make(chan time.Time, 16), let: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *holdProxy) Addr() string { return p.ln.Addr().String() }

// Hold keeps back every reply from now on, until Let.
func (p *holdProxy) Hold() {
	p.mu.Lock()
	p.held, p.let = true, make(chan struct{})
	p.mu.Unlock()
}

// Let sends the replies kept back, and every later one.
func (p *holdProxy) Let() {
	p.mu.Lock()
	if p.held {
		p.held = false
		close(p.let)
	}
	p.mu.Unlock()
}

func (p *holdProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(c, s, true)
		go p.pipe(s, c, false)
	}
}

func (p *holdProxy) pipe(src, dst net.Conn, request bool) {
	defer p.wg.Done()
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			held, let := p.held, p.let
			p.mu.Unlock()
			switch {
			case held && request:
				select {
				case p.sent <- time.Now():
				default:
				}
			case held:
				<-let
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				src.Close()
			}
			return
		}
	}
}

func (p *holdProxy) close() {
	p.ln.Close()
	p.Let()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// A grant or refresh whose reply comes back after its validity is refused
// with ErrGrantExpired: the reply is held back by the proxy until the
// validity (TTL 1 s, drift factor 0.9: 98 ms from the request) has passed
// for sure, while the key lives on in Redis for the TTL. The late grant,
// and the lock of a late refresh, are released.
func TestLateReplyRefused(t *testing.T) {
	if !redistest.Available(t) {
		return
	}
	srv := redistest.Start(t)
	p := startHoldProxy(t, srv.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	admin := srv.Client(nil)
	const ttl = time.Second
	c := newClient(t, rdb, redislock.WithDriftFactor(0.9), redislock.WithNodeTimeout(time.Minute))
	ctx := ctxT(t, 30*time.Second)
	validity := ttl - time.Duration(0.9*float64(ttl)) - 2*time.Millisecond

	// late runs op with the replies held back until the validity of a
	// request sent now has passed.
	late := func(op func() error) error {
		t.Helper()
		p.Hold()
		done := make(chan error, 1)
		go func() { done <- op() }()
		sent := <-p.sent // the call started before its request got here
		time.Sleep(time.Until(sent.Add(validity + time.Millisecond)))
		p.Let()
		return <-done
	}

	warm, err := c.Obtain(ctx, "late", ttl) // loads the scripts: one round trip each
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var l *redislock.Lock
	err = late(func() (err error) {
		l, err = c.Obtain(ctx, "late", ttl)
		return err
	})
	if !errors.Is(err, redislock.ErrGrantExpired) || l != nil {
		t.Fatalf("Obtain with a late reply = %v, %v, want ErrGrantExpired", l, err)
	}
	// The error says why: how long the call took, and that a longer TTL
	// leaves room for it.
	if msg := err.Error(); !strings.Contains(msg, "took") || !strings.Contains(msg, "longer TTL") {
		t.Fatalf("ErrGrantExpired gives no hint: %q", msg)
	}
	if v := admin.Get(ctx, redislock.DefaultPrefix+"{late}").Val(); !strings.HasPrefix(v, "~:") {
		t.Fatalf("after the late grant the lock key holds %q, want it released", v)
	}

	l, err = c.Obtain(ctx, "late", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if err := late(func() error { return l.Refresh(ctx, ttl) }); !errors.Is(err, redislock.ErrGrantExpired) {
		t.Fatalf("Refresh with a late reply = %v, want ErrGrantExpired", err)
	}
	if !l.ValidUntil().IsZero() {
		t.Fatalf("after a late refresh ValidUntil = %v, want zero (not held)", l.ValidUntil())
	}
	if v := admin.Get(ctx, redislock.DefaultPrefix+"{late}").Val(); !strings.HasPrefix(v, "~:") {
		t.Fatalf("after the late refresh the lock key holds %q, want it released", v)
	}
}
