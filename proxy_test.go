package redislock_test

import (
	"bytes"
	"io"
	"net"
	"sync"
	"testing"
)

// freezeProxy forwards loopback TCP connections to a Redis server. Freeze
// stops forwarding, in both directions, on the connections that have sent
// a SUBSCRIBE, while keeping them open: a subscription connection that
// went silent, as behind a broken NAT or a half-dead peer.
type freezeProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	conns []*proxyConn
	wg    sync.WaitGroup
}

type proxyConn struct {
	client, server net.Conn
	subscriber     bool // has sent a (S)SUBSCRIBE
	frozen         bool // forwards nothing any more
}

func startFreezeProxy(t *testing.T, target string) *freezeProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &freezeProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *freezeProxy) Addr() string { return p.ln.Addr().String() }

func (p *freezeProxy) accept() {
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
		pc := &proxyConn{client: c, server: s}
		p.mu.Lock()
		p.conns = append(p.conns, pc)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(pc, c, s, true)
		go p.pipe(pc, s, c, false)
	}
}

// pipe copies src to dst, chunk by chunk, dropping the chunks of a frozen
// subscriber connection.
func (p *freezeProxy) pipe(pc *proxyConn, src, dst net.Conn, fromClient bool) {
	defer p.wg.Done()
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			if fromClient && bytes.Contains(bytes.ToLower(buf[:n]), []byte("subscribe")) {
				pc.subscriber = true
			}
			drop := pc.frozen
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

// Freeze silences the connections that subscribed so far; connections
// opened later work normally.
func (p *freezeProxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pc := range p.conns {
		if pc.subscriber {
			pc.frozen = true
		}
	}
}

func (p *freezeProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, pc := range p.conns {
		pc.client.Close()
		pc.server.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
