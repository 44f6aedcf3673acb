package redistest_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redislock-go/redislock/internal/redistest"
)

// echo is a line server: it answers each line it reads with the same line,
// and reports the lines it got and the connections that ended.
type echo struct {
	ln    net.Listener
	lines chan string
	wg    sync.WaitGroup
}

func startEcho(t *testing.T) *echo {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echo{ln: ln, lines: make(chan string, 100)}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					e.lines <- sc.Text()
					if _, err := io.WriteString(c, sc.Text()+"\n"); err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		e.wg.Wait()
	})
	return e
}

// dial connects to addr; the connection is closed when the test ends.
func dial(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

// roundTrip sends line and returns the answer (or the read error).
func roundTrip(t *testing.T, c net.Conn, r *bufio.Reader, line string, timeout time.Duration) (string, error) {
	t.Helper()
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return "", err
	}
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	s, err := r.ReadString('\n')
	return strings.TrimSuffix(s, "\n"), err
}

const long = 10 * time.Second // a wait that only a broken proxy reaches

// quiet is how long a check waits for what must not come: a proxy that
// forwarded it would have done so long before.
const quiet = 100 * time.Millisecond

func TestProxyForwardsAndDelays(t *testing.T) {
	t.Parallel()
	e := startEcho(t)
	p := redistest.StartProxy(t, e.ln.Addr().String())
	c, r := dial(t, p.Addr())
	if got, err := roundTrip(t, c, r, "a", long); err != nil || got != "a" {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}
	const d = 50 * time.Millisecond
	p.Delay(redistest.Both, d)
	start := time.Now()
	if got, err := roundTrip(t, c, r, "b", long); err != nil || got != "b" {
		t.Fatalf("delayed: %q, %v", got, err)
	}
	if took := time.Since(start); took < 2*d {
		t.Fatalf("a round trip delayed %v each way took %v", d, took)
	}
	p.Delay(redistest.Both, 0)
	if got, err := roundTrip(t, c, r, "c", long); err != nil || got != "c" {
		t.Fatalf("after the delay: %q, %v", got, err)
	}
}

func TestProxyCutAndRestore(t *testing.T) {
	t.Parallel()
	e := startEcho(t)
	p := redistest.StartProxy(t, e.ln.Addr().String())
	old, oldR := dial(t, p.Addr())
	if _, err := roundTrip(t, old, oldR, "before", long); err != nil {
		t.Fatal(err)
	}
	<-e.lines
	p.Cut(redistest.Both)
	restored := make(chan struct{})
	go func() {
		p.WaitRestored(t.Context())
		close(restored)
	}()
	if _, err := roundTrip(t, old, oldR, "cut", quiet); !isTimeout(err) {
		t.Fatalf("an open connection during a cut: %v, want a timeout", err)
	}
	fresh, freshR := dial(t, p.Addr())
	if _, err := roundTrip(t, fresh, freshR, "cut-new", quiet); !isTimeout(err) {
		t.Fatalf("a new connection during a cut: %v, want a timeout", err)
	}
	select {
	case l := <-e.lines:
		t.Fatalf("the server got %q during the cut", l)
	case <-restored:
		t.Fatal("WaitRestored returned during the cut")
	default:
	}
	p.Restore()
	<-restored
	// The connections that were cut are closed.
	for _, r := range []*bufio.Reader{oldR, freshR} {
		if _, err := r.ReadString('\n'); err == nil {
			t.Fatal("a connection open during the cut still works after Restore")
		}
	}
	c, r := dial(t, p.Addr())
	if got, err := roundTrip(t, c, r, "after", long); err != nil || got != "after" {
		t.Fatalf("after Restore: %q, %v", got, err)
	}
}

// A cut of the requests only: what was sent is lost, the replies of what
// went through before still come.
func TestProxyCutOneWay(t *testing.T) {
	t.Parallel()
	e := startEcho(t)
	p := redistest.StartProxy(t, e.ln.Addr().String())
	c, r := dial(t, p.Addr())
	p.Delay(redistest.ToClient, 200*time.Millisecond)
	if _, err := io.WriteString(c, "through\n"); err != nil {
		t.Fatal(err)
	}
	<-e.lines // the request went through; its reply is on its way
	p.Cut(redistest.ToServer)
	if _, err := io.WriteString(c, "lost\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(long))
	if got, err := r.ReadString('\n'); err != nil || got != "through\n" {
		t.Fatalf("the reply sent before the cut: %q, %v", got, err)
	}
	if _, err := roundTrip(t, c, r, "lost too", quiet); !isTimeout(err) {
		t.Fatalf("a request during the cut: %v, want a timeout", err)
	}
}

func TestProxyCutSubscribers(t *testing.T) {
	t.Parallel()
	e := startEcho(t)
	p := redistest.StartProxy(t, e.ln.Addr().String())
	sub, subR := dial(t, p.Addr())
	plain, plainR := dial(t, p.Addr())
	for _, x := range []struct {
		c    net.Conn
		r    *bufio.Reader
		line string
	}{{sub, subR, "SUBSCRIBE ch"}, {plain, plainR, "GET k"}} {
		if _, err := roundTrip(t, x.c, x.r, x.line, long); err != nil {
			t.Fatal(err)
		}
	}
	p.CutSubscribers()
	if _, err := roundTrip(t, sub, subR, "PING", quiet); !isTimeout(err) {
		t.Fatalf("the subscriber after CutSubscribers: %v, want a timeout", err)
	}
	later, laterR := dial(t, p.Addr())
	for _, c := range []struct {
		c net.Conn
		r *bufio.Reader
	}{{plain, plainR}, {later, laterR}} {
		if got, err := roundTrip(t, c.c, c.r, "x", long); err != nil || got != "x" {
			t.Fatalf("another connection after CutSubscribers: %q, %v", got, err)
		}
	}
	p.Restore()
	if _, err := subR.ReadString('\n'); err == nil {
		t.Fatal("the silenced connection still works after Restore")
	}
}

func TestProxyHoldReplies(t *testing.T) {
	t.Parallel()
	e := startEcho(t)
	p := redistest.StartProxy(t, e.ln.Addr().String())
	c, r := dial(t, p.Addr())
	sent := p.HoldReplies()
	if _, err := io.WriteString(c, "held\n"); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	if at := <-sent; at.Before(before.Add(-time.Second)) {
		t.Fatalf("request passed at %v, before it was sent (%v)", at, before)
	}
	if l := <-e.lines; l != "held" {
		t.Fatalf("the server got %q", l)
	}
	_ = c.SetReadDeadline(time.Now().Add(quiet))
	if _, err := r.ReadString('\n'); !isTimeout(err) {
		t.Fatalf("a reply while held: %v, want a timeout", err)
	}
	p.Let()
	_ = c.SetReadDeadline(time.Now().Add(long))
	if got, err := r.ReadString('\n'); err != nil || got != "held\n" {
		t.Fatalf("the held reply after Let: %q, %v", got, err)
	}
}

func TestProxyReset(t *testing.T) {
	t.Parallel()
	e := startEcho(t)
	p := redistest.StartProxy(t, e.ln.Addr().String())
	c, r := dial(t, p.Addr())
	if _, err := roundTrip(t, c, r, "a", long); err != nil {
		t.Fatal(err)
	}
	p.Reset()
	_ = c.SetReadDeadline(time.Now().Add(long))
	if _, err := r.ReadString('\n'); err == nil || isTimeout(err) {
		t.Fatalf("a reset connection: %v, want it closed", err)
	}
	c2, r2 := dial(t, p.Addr())
	if got, err := roundTrip(t, c2, r2, "b", long); err != nil || got != "b" {
		t.Fatalf("a new connection after Reset: %q, %v", got, err)
	}
}

func TestBlackhole(t *testing.T) {
	t.Parallel()
	h := redistest.StartBlackhole(t)
	c, r := dial(t, h.Addr())
	if _, err := roundTrip(t, c, r, "PING", quiet); !isTimeout(err) {
		t.Fatalf("a blackhole answered: %v", err)
	}
	h.Close()
	_ = c.SetReadDeadline(time.Now().Add(long))
	if _, err := r.ReadString('\n'); err == nil || isTimeout(err) {
		t.Fatalf("after Close: %v, want the connection closed", err)
	}
}

func isTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }
