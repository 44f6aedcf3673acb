package nodes

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Why a call got no reply. go-redis dials on a goroutine of its pool and
// retries a failed dial (five dials 100 ms apart, then the command's own
// retries): it reports the dial error only when it gives up, seconds
// later than a call bounded by the node timeout of a short TTL, which then
// says only "context deadline exceeded". So a call on a node that no call
// has reached yet, or whose last call did not reach it, starts a dial
// probe if it has not returned after probeDelay (one probe at a time per
// node, its finding reused for probeFresh): one dial made the way go-redis
// dials (the client's own Dialer, with its TLS and, for a Sentinel
// failover client, its master lookup), closed at once. A call that then
// ends without a reply, on a timeout, names what the probe found: the dial
// error, a server that accepts connections but does not answer, or a
// connect not answered yet. A first call that returns in time costs no
// dial. For a Cluster client the probe dials the seed addresses, the first
// that connects deciding; a Ring or another client gets no probe.

// probeFresh is how long a probe's finding stands for the calls that start
// after it: calls in a loop against a node that is down make one dial of
// their own per probeFresh, beside go-redis' dials.
const probeFresh = time.Second

// probeDelay is how long a call on a node not known to be reachable runs
// before it starts a probe: a quarter of its timeout, at most 20 ms, so
// that the probe has an answer when the call times out, and a call that
// returns sooner (the first call on a healthy node) costs no dial.
func probeDelay(timeout time.Duration) time.Duration {
	if timeout <= 0 {
		return 20 * time.Millisecond
	}
	return min(timeout/4, 20*time.Millisecond)
}

// defaultDialTimeout bounds a probe's dial when the client sets no
// DialTimeout (go-redis' own default).
const defaultDialTimeout = 5 * time.Second

// probing marks the context of a probe's dial (IsProbe).
type probing struct{}

// IsProbe reports whether ctx is the context of a dial probe's dial, for a
// Dialer that must tell those from go-redis' own dials (a test that counts
// the dials of its client). The probe dials with the client's own Dialer:
// a custom Dialer sees its dials too, at most one per node per probeFresh.
func IsProbe(ctx context.Context) bool { return ctx.Value(probing{}) != nil }

// errProberClosed is the finding of a probe that never ran: its node was
// closed.
var errProberClosed = errors.New("redislock: node closed")

// probe is one dial probe of a node.
type probe struct {
	target  string      // where it dials, as the client's options say
	began   time.Time   // when it was started
	dialing atomic.Bool // its goroutine has begun to dial
	done    atomic.Bool
	ended   time.Time // set before done
	addr    string    // set before done: where it connected, or tried to
	err     error     // set before done: the dial's error; nil: it connected
}

// prober runs a node's probes.
type prober struct {
	dial   func(ctx context.Context) (addr string, err error) // nil: this kind of client is not probed
	target string                                             // where it dials
	last   atomic.Pointer[probe]
	begin  func() // p.start as a func value, made once

	ctx    context.Context // the probes' dials, marked (IsProbe); ended by close
	cancel context.CancelFunc
	mu     sync.Mutex // guards stop and the start of wg's goroutines
	stop   bool
	wg     sync.WaitGroup
}

// newProber returns the prober of rdb's node.
func newProber(rdb redis.UniversalClient) *prober {
	p := &prober{}
	p.dial, p.target = dialerOf(rdb)
	p.ctx, p.cancel = context.WithCancel(context.WithValue(context.Background(), probing{}, true))
	p.begin = func() { p.start() }
	return p
}

// after starts a probe after delay, unless stop is called first (stop
// reports whether it was).
func (p *prober) after(delay time.Duration) (stop func() bool) {
	if p.dial == nil {
		return func() bool { return true }
	}
	return time.AfterFunc(delay, p.begin).Stop
}

// failoverAddr is the Addr go-redis gives the options of a Sentinel
// failover client, whose Dialer asks the Sentinels for the master.
const failoverAddr = "FailoverClient"

// dialerOf returns a dial of the server rdb talks to, as go-redis dials
// it, and closed at once, and where it dials; nil for a client that is not
// probed.
func dialerOf(rdb redis.UniversalClient) (func(ctx context.Context) (string, error), string) {
	switch r := rdb.(type) {
	case *redis.Client:
		o := r.Options()
		if o.Dialer == nil {
			return nil, ""
		}
		target := o.Addr
		if target == failoverAddr {
			target = "the Sentinels' master"
		}
		return func(ctx context.Context) (string, error) {
			return dialOnce(ctx, o.Dialer, o.Network, o.Addr, o.DialTimeout)
		}, target
	case *redis.ClusterClient:
		o := r.Options()
		if len(o.Addrs) == 0 {
			return nil, ""
		}
		dial := o.Dialer
		if dial == nil {
			d := &net.Dialer{}
			dial = d.DialContext
			if o.TLSConfig != nil {
				dial = (&tls.Dialer{NetDialer: d, Config: o.TLSConfig}).DialContext
			}
		}
		return func(ctx context.Context) (addr string, err error) {
			for i, seed := range o.Addrs {
				a, e := dialOnce(ctx, dial, "tcp", seed, o.DialTimeout)
				if e == nil {
					return a, nil
				}
				if i == 0 {
					addr, err = a, e
				}
			}
			return addr, err
		}, o.Addrs[0]
	}
	return nil, ""
}

// dialOnce dials addr with dial, within timeout (0: defaultDialTimeout), and
// closes the connection: where it connected (the remote address), or the
// error.
func dialOnce(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error),
	network, addr string, timeout time.Duration) (string, error) {
	if timeout <= 0 {
		timeout = defaultDialTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if network == "" {
		network = "tcp"
	}
	conn, err := dial(ctx, network, addr)
	if err != nil {
		return addr, err
	}
	if ra := conn.RemoteAddr(); ra != nil {
		addr = ra.String()
	}
	_ = conn.Close()
	return addr, nil
}

// fired makes sure that the probe whose timer fired during a call that
// began at start is in place for explain: its goroutine may not have run
// yet.
func (p *prober) fired(start time.Time) {
	if pr := p.last.Load(); pr == nil || pr.began.Before(start) {
		p.start()
	}
}

// start returns the probe for a call under way: the one under way, or one
// that ended less than probeFresh ago, or a new one; nil when the node is
// not probed or its prober was stopped.
func (p *prober) start() *probe {
	if p.dial == nil {
		return nil
	}
	last := p.last.Load()
	if last != nil && (!last.done.Load() || time.Since(last.ended) < probeFresh) {
		return last
	}
	pr := &probe{target: p.target, began: time.Now()}
	if !p.last.CompareAndSwap(last, pr) {
		return p.last.Load() // another call started one
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stop {
		pr.err = errProberClosed
		pr.done.Store(true)
		return nil
	}
	p.wg.Go(func() {
		pr.dialing.Store(true)
		pr.addr, pr.err = p.dial(p.ctx)
		pr.ended = time.Now()
		pr.done.Store(true)
	})
	return pr
}

// probeCloseWait bounds how long Close waits for a probe under way once
// cancelled: a TLS dial of go-redis' own Dialer does not see the
// cancellation, and ends within its DialTimeout.
const probeCloseWait = time.Second

// close stops the prober: a probe under way is cancelled, and waited for
// at most probeCloseWait.
func (p *prober) close() {
	p.mu.Lock()
	p.stop = true
	p.mu.Unlock()
	p.cancel()
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	t := time.NewTimer(probeCloseWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// NoReplyError is the error of a call that got no reply from a node that
// no call had reached before it, or whose last call had not: Err, the
// call's error (a timeout, or the end of its context), and what a dial of
// the node found (Dial: its error; nil when it connected, or, if Dialing,
// when it had no answer yet). It matches Err and Dial.
type NoReplyError struct {
	Err     error
	Addr    string // where the dial connected, or tried to
	Dial    error
	Dialing bool
	Waited  time.Duration // the call's timeout, when that ended it; 0: its context or go-redis did
}

// Error says why first, then how the call ended: its timeout ("(no
// reply within 988ms)"), or its error at the end of the message, so that
// joining the context's error to it says that once.
func (e *NoReplyError) Error() string {
	var why, within string
	switch {
	case e.Dial != nil:
		why, within = e.Dial.Error(), " (no reply within %v)"
	case e.Dialing:
		why, within = "connecting to "+e.Addr+": no answer", " within %v"
	default:
		why, within = e.Addr+" accepts connections but sent no reply", " within %v"
	}
	if e.Waited > 0 {
		return why + fmt.Sprintf(within, e.Waited)
	}
	return why + ": " + e.Err.Error()
}

// Unwrap returns the call's error and the dial's.
func (e *NoReplyError) Unwrap() []error {
	if e.Dial == nil {
		return []error{e.Err}
	}
	return []error{e.Err, e.Dial}
}

// explain returns err, the error of a call made on ctx with timeout from
// start, as a *NoReplyError when the call got no reply in time (its
// timeout, the end of ctx's deadline, go-redis' socket timeout) and a
// probe began during it, or ended less than probeFresh before it: what the
// probe found says why. Other errors are returned as they are.
func (p *prober) explain(ctx context.Context, err error, start time.Time, timeout time.Duration) error {
	if !noReply(err) {
		return err
	}
	pr := p.last.Load()
	if pr == nil || pr.began.Before(start) && pr.done.Load() && start.Sub(pr.ended) >= probeFresh {
		return err // no probe ran for this call
	}
	if !pr.dialing.Load() {
		return err // its goroutine has not run yet: a starved process, it knows nothing
	}
	e := &NoReplyError{Err: err}
	if ctx.Err() == nil && timeout > 0 && time.Since(start) >= timeout {
		e.Waited = timeout // the call's own bound ended it
	}
	if !pr.done.Load() {
		e.Addr, e.Dialing = pr.target, true
		return e
	}
	e.Addr, e.Dial = pr.addr, pr.err
	return e
}

// noReply reports whether err is that of a call that got no reply in
// time: its timeout or context deadline passed (ErrAbandoned, or
// context.DeadlineExceeded from go-redis) or go-redis' socket timed out;
// not an error reply, nor a cancellation, nor a dial error (which says
// why already).
func noReply(err error) bool {
	var op *net.OpError
	switch {
	case isReply(err), errors.Is(err, context.Canceled), NotSent(err):
		return false
	case errors.As(err, &op) && op.Op == "dial":
		return false
	case IsLate(err), errors.Is(err, context.DeadlineExceeded):
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// NoReply returns err, the timeout of a call to the node that its caller
// stopped waiting for without a reply (a fan-out's node not heard from in
// time), explained as Call explains its own: a *NoReplyError with what
// the node's dial probe found, when a probe ran beside the call (no call
// had reached the node, or the last one had not); else err itself.
func (n *Node) NoReply(err error) error {
	if n.reached.Load() && !n.down.Load() {
		return err
	}
	return n.probes.explain(context.Background(), err, time.Time{}, 0)
}
