package leader_test

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
)

// proxy forwards loopback TCP connections to a Redis server, and can cut
// them: while cut it forwards nothing in either direction on any
// connection, old or new, but keeps them open, as a partitioned network
// does (calls hang until their deadline). Restore closes the connections
// that were cut, whose protocol state is lost, and forwards again.
type proxy struct {
	ln     net.Listener
	target string

	mu       sync.Mutex
	conns    map[*pconn]struct{} // guarded by mu
	cut      bool                // guarded by mu
	restored chan struct{}       // guarded by mu: closed at Restore, replaced at Cut
	wg       sync.WaitGroup
}

type pconn struct {
	client, server net.Conn
	cut            bool // guarded by proxy.mu: forwards nothing any more
}

func startProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, conns: make(map[*pconn]struct{}), restored: make(chan struct{})}
	close(p.restored)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) Addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
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
		pc := &pconn{client: c, server: s}
		p.mu.Lock()
		pc.cut = p.cut
		p.conns[pc] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(pc, c, s)
		go p.pipe(pc, s, c)
	}
}

// pipe copies src to dst, dropping what arrives while pc is cut.
func (p *proxy) pipe(pc *pconn, src, dst net.Conn) {
	defer p.wg.Done()
	defer func() {
		pc.client.Close()
		pc.server.Close()
		p.mu.Lock()
		delete(p.conns, pc)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			drop := pc.cut
			p.mu.Unlock()
			if !drop {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
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

// Cut stops all forwarding, on the open connections and on new ones.
func (p *proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return
	}
	p.cut = true
	p.restored = make(chan struct{})
	for pc := range p.conns {
		pc.cut = true
	}
}

// Restore closes the connections that were cut and forwards new ones.
func (p *proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.cut {
		return
	}
	p.cut = false
	close(p.restored)
	for pc := range p.conns {
		if pc.cut {
			pc.client.Close()
			pc.server.Close()
		}
	}
}

// waitRestored returns when the proxy forwards, or ctx ends.
func (p *proxy) waitRestored(ctx context.Context) {
	p.mu.Lock()
	ch := p.restored
	p.mu.Unlock()
	select {
	case <-ch:
	case <-ctx.Done():
	}
}

func (p *proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for pc := range p.conns {
		pc.client.Close()
		pc.server.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
