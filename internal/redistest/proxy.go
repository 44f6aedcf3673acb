package redistest

import (
	"bytes"
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Dir is a direction of the traffic through a Proxy.
type Dir uint8

// The directions: requests travel to the server, replies (and pub/sub
// messages) to the client.
const (
	ToServer Dir = 1 << iota
	ToClient
	Both = ToServer | ToClient
)

// Proxy forwards loopback TCP connections to one server (a redis-server)
// and injects the faults of the network between a client and it: latency,
// a partition that keeps connections open, connections that go silent,
// replies held back, connections reset. A fault set on the Proxy applies
// to the connections open at the time and to the ones accepted later. Its
// methods are safe for concurrent use; it is closed when the test ends.
type Proxy struct {
	ln     net.Listener
	target string // "": a blackhole, which dials nothing
	done   chan struct{}

	mu       sync.Mutex
	conns    map[*proxyConn]struct{}
	delay    [2]time.Duration // per direction (dirIndex)
	cut      [2]bool          // per direction: what arrives is dropped
	held     chan struct{}    // non-nil while replies are held: closed by Let
	sent     chan time.Time   // while replies are held, the time each request passed
	restored chan struct{}    // closed while nothing is cut; replaced at Cut
	faults   chan Fault       // made by Faults
	closed   bool
	wg       sync.WaitGroup
}

type proxyConn struct {
	client, server net.Conn // server is nil in a blackhole
	// guarded by Proxy.mu
	subscriber bool // has sent a (S)SUBSCRIBE
	silent     bool // CutSubscribers: forwards nothing in either direction
	cut        bool // was open while a Cut was on: Restore closes it
}

// StartProxy starts a proxy to target on a free loopback port.
func StartProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	p := &Proxy{ln: ln, target: target, done: make(chan struct{}), conns: make(map[*proxyConn]struct{}),
		restored: make(chan struct{})}
	close(p.restored)
	p.wg.Add(1)
	go p.accept()
	tb.Cleanup(p.Close)
	return p
}

// Addr is where clients connect.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func dirIndex(d Dir) int {
	if d == ToClient {
		return 1
	}
	return 0
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		pc := &proxyConn{client: c}
		if p.target != "" {
			if pc.server, err = net.Dial("tcp", p.target); err != nil {
				c.Close()
				continue
			}
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			pc.close()
			return
		}
		pc.cut = p.cut[0] || p.cut[1]
		p.conns[pc] = struct{}{}
		p.wg.Add(1)
		go p.pipe(pc, ToServer)
		if pc.server != nil {
			p.wg.Add(1)
			go p.pipe(pc, ToClient)
		}
		p.mu.Unlock()
	}
}

func (pc *proxyConn) close() {
	pc.client.Close()
	if pc.server != nil {
		pc.server.Close()
	}
}

// pipe copies one direction of pc, chunk by chunk, applying the faults;
// when either side ends, the connection is closed both ways.
func (p *Proxy) pipe(pc *proxyConn, d Dir) {
	defer p.wg.Done()
	defer func() {
		pc.close()
		p.mu.Lock()
		delete(p.conns, pc)
		p.mu.Unlock()
	}()
	src, dst := pc.client, pc.server
	if d == ToClient {
		src, dst = pc.server, pc.client
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.forward(pc, d, buf[:n], dst) {
			return
		}
		if err != nil {
			if err != io.EOF {
				src.Close()
			}
			return
		}
	}
}

// forward writes b to dst as the faults of direction d say; false when the
// connection is done.
func (p *Proxy) forward(pc *proxyConn, d Dir, b []byte, dst net.Conn) bool {
	i := dirIndex(d)
	p.mu.Lock()
	if d == ToServer && bytes.Contains(bytes.ToLower(b), []byte("subscribe")) {
		pc.subscriber = true
	}
	drop := dst == nil || p.cut[i] || pc.silent
	delay, held := p.delay[i], p.held
	if held != nil && d == ToServer && !drop {
		select {
		case p.sent <- time.Now():
		default:
		}
	}
	if (drop || held != nil && d == ToClient) && p.faults != nil {
		select {
		case p.faults <- Fault{Dir: d, Data: bytes.Clone(b), Held: !drop}:
		default:
		}
	}
	p.mu.Unlock()
	if drop {
		return true
	}
	if held != nil && d == ToClient {
		select {
		case <-held:
		case <-p.done:
			return false
		}
	}
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-p.done:
			t.Stop()
			return false
		}
	}
	_, err := dst.Write(b)
	return err == nil
}

// Fault is what the Proxy did to one chunk of the traffic because of a
// fault: dropped it (a Cut, a silenced connection, a blackhole) or held
// it back (HoldReplies).
type Fault struct {
	Dir  Dir
	Data []byte // the chunk as it was read
	Held bool   // held back, not dropped
}

// faultsCap is how many Faults wait to be received; more are not told.
const faultsCap = 64

// Faults returns a channel that receives each chunk the Proxy drops or
// holds back from now on, for a test that waits for a fault to act rather
// than for a window of time to pass. While the channel is full (64
// Faults), further ones are not told.
func (p *Proxy) Faults() <-chan Fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.faults == nil {
		p.faults = make(chan Fault, faultsCap)
	}
	return p.faults
}

// Delay makes what travels in dir wait d before it is forwarded (0: no
// delay), in order: a connection's later chunks wait behind earlier ones.
func (p *Proxy) Delay(dir Dir, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, x := range []Dir{ToServer, ToClient} {
		if dir&x != 0 {
			p.delay[dirIndex(x)] = d
		}
	}
}

// Cut drops what travels in dir on every connection, open or new, and
// keeps the connections open, as a partitioned network does: calls hang
// until their deadline. Restore ends it.
func (p *Proxy) Cut(dir Dir) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.cut[0] && !p.cut[1] {
		p.restored = make(chan struct{})
	}
	for _, x := range []Dir{ToServer, ToClient} {
		if dir&x != 0 {
			p.cut[dirIndex(x)] = true
		}
	}
	for pc := range p.conns {
		pc.cut = true
	}
}

// CutSubscribers silences, in both directions, the open connections that
// have sent a SUBSCRIBE or SSUBSCRIBE, keeping them open: a subscription
// connection gone silent, as behind a broken NAT. Other connections, and
// the ones accepted later, work normally.
func (p *Proxy) CutSubscribers() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for pc := range p.conns {
		if pc.subscriber {
			pc.silent = true
		}
	}
}

// Restore ends Cut and CutSubscribers: the connections they touched are
// closed (what they dropped left their protocol state broken), new ones
// are forwarded.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut[0] || p.cut[1] {
		close(p.restored)
	}
	p.cut = [2]bool{}
	for pc := range p.conns {
		if pc.cut || pc.silent {
			pc.close()
		}
	}
}

// WaitRestored returns when the Proxy forwards (no Cut is on), or ctx
// ends.
func (p *Proxy) WaitRestored(ctx context.Context) {
	p.mu.Lock()
	ch := p.restored
	p.mu.Unlock()
	select {
	case <-ch:
	case <-ctx.Done():
	}
}

// HoldReplies keeps every reply back from now on, until Let: requests go
// through, so the server runs them. The channel receives the time each
// request passes while the replies are held (the first 16 of them).
func (p *Proxy) HoldReplies() <-chan time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held == nil {
		p.held, p.sent = make(chan struct{}), make(chan time.Time, 16)
	}
	return p.sent
}

// Let forwards the replies held back, and every later one.
func (p *Proxy) Let() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held != nil {
		close(p.held)
		p.held = nil
	}
}

// Reset resets every open connection (TCP RST to both sides); new
// connections are accepted as before.
func (p *Proxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for pc := range p.conns {
		for _, c := range []net.Conn{pc.client, pc.server} {
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
		}
		pc.close()
	}
}

// Close stops accepting, closes every connection and waits for the
// proxy's goroutines. It is called when the test ends; later calls do
// nothing.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	close(p.done)
	for pc := range p.conns {
		pc.close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}

// Blackhole is a listener on a free loopback port that accepts
// connections and never answers: what it is sent is read and dropped.
type Blackhole struct{ p *Proxy }

// StartBlackhole starts a Blackhole, closed when the test ends.
func StartBlackhole(tb testing.TB) *Blackhole {
	tb.Helper()
	return &Blackhole{p: StartProxy(tb, "")}
}

// Addr is where clients connect.
func (h *Blackhole) Addr() string { return h.p.Addr() }

// Close closes the listener and every connection: calls waiting on them
// fail. Later calls do nothing.
func (h *Blackhole) Close() { h.p.Close() }

// Faults returns a channel that receives each chunk the Blackhole drops
// from now on (see Proxy.Faults).
func (h *Blackhole) Faults() <-chan Fault { return h.p.Faults() }
