package sim

import (
	"cmp"
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// ErrRefused is a dial to a node that is down.
var ErrRefused = errors.New("sim: connection refused")

// ErrUnreachable is a dial without deadline to a blackholed node.
var ErrUnreachable = errors.New("sim: no route to host")

// Node is one server as the network sees it.
type Node struct {
	// Dial opens a connection to the server itself (the far end of every
	// link to it).
	Dial func() (net.Conn, error)
	// Deliver is called before bytes are handed to the server (the tests
	// set its clock there); may be nil.
	Deliver func()
}

// Faults is the state of the network in front of one node.
type Faults struct {
	Down      bool          // dials are refused
	Blackhole bool          // dials hang; bytes in flight and later are never delivered
	DelayLo   time.Duration // each chunk's delay, drawn in [DelayLo, DelayHi]
	DelayHi   time.Duration
	DropReply float64 // chance that a reply is lost (its connection stalls)
}

// Network connects clients to nodes through links whose faults the
// schedule sets. Its methods are safe for concurrent use.
type Network struct {
	seed  int64
	nodes []Node

	mu     sync.Mutex
	closed bool
	faults []Faults
	links  map[*link]int // open links, by node
	dials  map[[2]int]uint64
	nextID uint64
}

// NewNetwork returns a network in front of nodes, its random choices drawn
// from seed.
func NewNetwork(seed int64, nodes []Node) *Network {
	return &Network{seed: seed, nodes: nodes, faults: make([]Faults, len(nodes)),
		links: map[*link]int{}, dials: map[[2]int]uint64{}}
}

// Set replaces the faults in front of node i. A node set Down or
// Blackhole has its open connections cut or stalled at once.
func (n *Network) Set(i int, f Faults) {
	n.mu.Lock()
	n.faults[i] = f
	var cut, stall []*link
	for _, l := range n.sorted() {
		if node := n.links[l]; node != i {
			continue
		}
		switch {
		case f.Down:
			cut = append(cut, l)
		case f.Blackhole:
			stall = append(stall, l)
		}
	}
	n.mu.Unlock()
	for _, l := range cut {
		l.close()
	}
	for _, l := range stall {
		l.stall()
	}
}

// Get returns the faults in front of node i.
func (n *Network) Get(i int) Faults {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.faults[i]
}

// Cut closes every open connection to node i (both ends see it closed).
func (n *Network) Cut(i int) {
	n.mu.Lock()
	var cut []*link
	for _, l := range n.sorted() {
		if n.links[l] == i {
			cut = append(cut, l)
		}
	}
	n.mu.Unlock()
	for _, l := range cut {
		l.close()
	}
}

// Close cuts every connection and refuses dials from now on: the end of a
// run, so that no link outlives it (go-redis may drop a connection it was
// dialing when its pool closes, without closing it).
func (n *Network) Close() {
	n.mu.Lock()
	n.closed = true
	cut := n.sorted()
	n.mu.Unlock()
	for _, l := range cut {
		l.close()
	}
}

// sorted returns the open links in dial order (not a map's random one, so
// that a seed's cuts replay alike); n.mu is held.
func (n *Network) sorted() []*link {
	ls := make([]*link, 0, len(n.links))
	for l := range n.links {
		ls = append(ls, l)
	}
	slices.SortFunc(ls, func(a, b *link) int { return cmp.Compare(a.id, b.id) })
	return ls
}

// Dialer returns a go-redis Dialer for client c to node i.
func (n *Network) Dialer(c, i int) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, _, _ string) (net.Conn, error) { return n.dial(ctx, c, i) }
}

func (n *Network) dial(ctx context.Context, c, i int) (net.Conn, error) {
	n.mu.Lock()
	f := n.faults[i]
	k := [2]int{c, i}
	n.dials[k]++
	dial := n.dials[k]
	closed := n.closed
	n.mu.Unlock()
	switch {
	case f.Down || closed:
		return nil, ErrRefused
	case f.Blackhole && ctx.Done() == nil:
		// A dial that cannot end would hang the run: a real dialer's
		// timeout fails it, later.
		return nil, ErrUnreachable
	case f.Blackhole:
		<-ctx.Done() // go-redis' pool dials carry the dial timeout
		return nil, ctx.Err()
	}
	srv, err := n.nodes[i].Dial()
	if err != nil {
		return nil, err
	}
	cl, x := net.Pipe()
	l := &link{n: n, node: i, client: x, server: srv, done: make(chan struct{})}
	n.mu.Lock()
	if n.faults[i].Down || n.closed { // went down meanwhile
		n.mu.Unlock()
		srv.Close()
		cl.Close()
		x.Close()
		return nil, ErrRefused
	}
	n.nextID++
	l.id = n.nextID
	n.links[l] = i
	n.mu.Unlock()
	// One stream per direction: each is drawn from by its own pump alone,
	// so the two directions' draws never interleave in the scheduler's
	// order.
	l.rnd = [2]*Rand{NewRand(n.seed, 1, uint64(c), uint64(i), dial, 0), NewRand(n.seed, 1, uint64(c), uint64(i), dial, 1)}
	l.start()
	return &tcpLike{Conn: cl}, nil
}

// tcpLike makes a cut connection fail as TCP does: a write to a closed
// peer seems to succeed, and the read after it finds EOF (go-redis
// retries a command on EOF, as against a real server).
type tcpLike struct {
	net.Conn
	local atomic.Bool // closed by its owner
}

func (c *tcpLike) Write(b []byte) (int, error) {
	k, err := c.Conn.Write(b)
	if c.peerClosed(err) == nil {
		return len(b), nil
	}
	return k, err
}

// SetDeadline and the others succeed on a connection its peer closed, as
// on a socket (a pipe refuses them), so that the write and the read that
// finds EOF follow.
func (c *tcpLike) SetDeadline(t time.Time) error     { return c.peerClosed(c.Conn.SetDeadline(t)) }
func (c *tcpLike) SetReadDeadline(t time.Time) error { return c.peerClosed(c.Conn.SetReadDeadline(t)) }
func (c *tcpLike) SetWriteDeadline(t time.Time) error {
	return c.peerClosed(c.Conn.SetWriteDeadline(t))
}

func (c *tcpLike) peerClosed(err error) error {
	if errors.Is(err, io.ErrClosedPipe) && !c.local.Load() {
		return nil
	}
	return err
}

func (c *tcpLike) Close() error {
	c.local.Store(true)
	return c.Conn.Close()
}

// link carries one connection: client is the network's end of the
// client's pipe, server the node's connection.
type link struct {
	n      *Network
	id     uint64 // in dial order: cuts and stalls go in this order
	node   int
	client net.Conn
	server net.Conn
	done   chan struct{} // closed with the link

	mu      sync.Mutex
	rnd     [2]*Rand  // per direction: [0] up, [1] down
	last    time.Time // latest delivery so far (bytes keep their order)
	closed  bool
	stalled bool // nothing will be delivered any more
}

func (l *link) start() {
	go l.pump(l.client, l.server, true)
	go l.pump(l.server, l.client, false)
}

func (l *link) stall() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stalled = true
}

func (l *link) close() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	close(l.done)
	l.mu.Unlock()
	l.client.Close()
	l.server.Close()
	l.n.mu.Lock()
	delete(l.n.links, l)
	l.n.mu.Unlock()
}

func dirIndex(up bool) int {
	if up {
		return 0
	}
	return 1
}

type chunk struct {
	b  []byte
	at time.Time
}

// pump moves bytes from src to dst, each chunk after its delay; up is the
// client-to-server direction.
func (l *link) pump(src, dst net.Conn, up bool) {
	q := make(chan chunk, 256)
	go func() {
		defer close(q)
		buf := make([]byte, 32<<10)
		for {
			k, err := src.Read(buf)
			if k > 0 {
				select {
				case q <- chunk{b: append([]byte(nil), buf[:k]...), at: l.deliverAt(up)}:
				case <-l.done:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	defer l.close()
	for c := range q {
		if d := time.Until(c.at); d > 0 {
			// The chunk's delay on the wire. The network runs in the
			// simulation's synctest bubble: this sleep is the bubble's fake
			// time passing, the one way to delay a delivery in it.
			time.Sleep(d)
		}
		if !l.deliverable(up) {
			continue // stalled: swallowed, like a blackholed route
		}
		if up && l.n.nodes[l.node].Deliver != nil {
			l.n.nodes[l.node].Deliver()
		}
		if _, err := dst.Write(c.b); err != nil {
			return
		}
	}
}

// deliverAt is when a chunk read now reaches the other end: after its
// delay, and not before the chunk read before it.
func (l *link) deliverAt(up bool) time.Time {
	f := l.n.Get(l.node)
	l.mu.Lock()
	defer l.mu.Unlock()
	// Every chunk takes a few µs more, drawn from the seed: no two
	// deliveries fall on one instant, whose order the Go scheduler, not
	// the seed, would decide.
	r := l.rnd[dirIndex(up)]
	at := time.Now().Add(r.Between(f.DelayLo, f.DelayHi) + r.Between(time.Microsecond, 50*time.Microsecond))
	if at.Before(l.last) {
		at = l.last
	}
	l.last = at
	return at
}

// deliverable decides whether a chunk due now is delivered: not on a
// stalled link or in front of a blackholed node; a reply may be dropped,
// which stalls the link.
func (l *link) deliverable(up bool) bool {
	f := l.n.Get(l.node)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stalled || l.closed {
		return false
	}
	if f.Blackhole || (!up && f.DropReply > 0 && l.rnd[1].Chance(f.DropReply)) {
		l.stalled = true
		return false
	}
	return true
}
