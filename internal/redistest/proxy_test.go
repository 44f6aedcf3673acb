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

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/internal/testkit"
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
	require.NoError(t, err)
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

// conn is a client connection to a proxy, closed when the test ends.
type conn struct {
	net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, addr string) *conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return &conn{c, bufio.NewReader(c)}
}

// send writes line.
func (c *conn) send(t *testing.T, line string) {
	t.Helper()
	_, err := io.WriteString(c, line+"\n")
	require.NoError(t, err)
}

// reply reads one line, waiting at most long.
func (c *conn) reply() (string, error) {
	_ = c.SetReadDeadline(time.Now().Add(long))
	s, err := c.r.ReadString('\n')
	return strings.TrimSuffix(s, "\n"), err
}

// roundTrip sends line and requires it back.
func (c *conn) roundTrip(t *testing.T, line string) {
	t.Helper()
	c.send(t, line)
	got, err := c.reply()
	require.NoError(t, err, "%q", line)
	require.Equal(t, line, got)
}

// quiet requires that c is open with nothing to read now: no byte in its
// buffer or the socket's, no end-of-file. It does not wait; call it when
// what could arrive cannot any more (the proxy dropped the request, or
// holds the reply).
func (c *conn) quiet(t *testing.T, what string) {
	t.Helper()
	require.Zero(t, c.r.Buffered(), "%s: a reply arrived", what)
	raw, err := c.Conn.(*net.TCPConn).SyscallConn()
	require.NoError(t, err)
	var n int
	var rerr error
	require.NoError(t, raw.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, rerr = unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		return true
	}))
	require.ErrorIs(t, rerr, unix.EAGAIN, "%s: want nothing to read, read %d bytes", what, n)
}

// fault waits for the proxy's next fault and requires it to be want.
func fault(t *testing.T, faults <-chan redistest.Fault, want redistest.Fault) {
	t.Helper()
	require.Equal(t, want, testkit.Recv(t, faults, "the proxy's fault on %q", want.Data))
}

func dropped(d redistest.Dir, line string) redistest.Fault {
	return redistest.Fault{Dir: d, Data: []byte(line + "\n")}
}

const long = 10 * time.Second // a wait that only a broken proxy reaches

func TestProxyForwardsAndDelays(t *testing.T) {
	t.Parallel()
	e := startEcho(t)
	p := redistest.StartProxy(t, e.ln.Addr().String())
	c := dial(t, p.Addr())
	c.roundTrip(t, "a")
	const d = 50 * time.Millisecond
	p.Delay(redistest.Both, d)
	start := time.Now()
	c.roundTrip(t, "b")
	require.GreaterOrEqual(t, time.Since(start), 2*d, "a round trip delayed %v each way", d)
	p.Delay(redistest.Both, 0)
	c.roundTrip(t, "c")
}

func TestProxyCutAndRestore(t *testing.T) {
	t.Parallel()
	e := startEcho(t)
	p := redistest.StartProxy(t, e.ln.Addr().String())
	faults := p.Faults()
	old := dial(t, p.Addr())
	old.roundTrip(t, "before")
	<-e.lines
	p.Cut(redistest.Both)
	restored := make(chan struct{})
	go func() {
		p.WaitRestored(t.Context())
		close(restored)
	}()
	old.send(t, "cut")
	fault(t, faults, dropped(redistest.ToServer, "cut"))
	old.quiet(t, "an open connection during a cut")
	fresh := dial(t, p.Addr())
	fresh.send(t, "cut-new")
	fault(t, faults, dropped(redistest.ToServer, "cut-new"))
	fresh.quiet(t, "a new connection during a cut")
	testkit.NoRecv(t, e.lines, "the server got a line during the cut")
	testkit.NoRecv(t, restored, "WaitRestored returned during the cut")
	p.Restore()
	<-restored
	// The connections that were cut are closed.
	for _, c := range []*conn{old, fresh} {
		_, err := c.reply()
		require.Error(t, err, "a connection open during the cut still works after Restore")
	}
	dial(t, p.Addr()).roundTrip(t, "after")
}

// A cut of the requests only: what was sent is lost, the replies of what
// went through before still come.
func TestProxyCutOneWay(t *testing.T) {
	t.Parallel()
	e := startEcho(t)
	p := redistest.StartProxy(t, e.ln.Addr().String())
	faults := p.Faults()
	c := dial(t, p.Addr())
	p.Delay(redistest.ToClient, 200*time.Millisecond)
	c.send(t, "through")
	<-e.lines // the request went through; its reply is on its way
	p.Cut(redistest.ToServer)
	c.send(t, "lost")
	got, err := c.reply()
	require.NoError(t, err, "the reply sent before the cut")
	require.Equal(t, "through", got, "the reply sent before the cut")
	fault(t, faults, dropped(redistest.ToServer, "lost"))
	c.send(t, "lost too")
	fault(t, faults, dropped(redistest.ToServer, "lost too"))
	c.quiet(t, "a request during the cut")
}

func TestProxyCutSubscribers(t *testing.T) {
	t.Parallel()
	e := startEcho(t)
	p := redistest.StartProxy(t, e.ln.Addr().String())
	faults := p.Faults()
	sub, plain := dial(t, p.Addr()), dial(t, p.Addr())
	sub.roundTrip(t, "SUBSCRIBE ch")
	plain.roundTrip(t, "GET k")
	p.CutSubscribers()
	sub.send(t, "PING")
	fault(t, faults, dropped(redistest.ToServer, "PING"))
	sub.quiet(t, "the subscriber after CutSubscribers")
	for _, c := range []*conn{plain, dial(t, p.Addr())} {
		c.roundTrip(t, "x") // another connection after CutSubscribers
	}
	p.Restore()
	_, err := sub.reply()
	require.Error(t, err, "the silenced connection still works after Restore")
}

func TestProxyHoldReplies(t *testing.T) {
	t.Parallel()
	e := startEcho(t)
	p := redistest.StartProxy(t, e.ln.Addr().String())
	faults := p.Faults()
	c := dial(t, p.Addr())
	sent := p.HoldReplies()
	c.send(t, "held")
	before := time.Now()
	at := <-sent
	require.False(t, at.Before(before.Add(-time.Second)), "request passed at %v, before it was sent (%v)", at, before)
	require.Equal(t, "held", <-e.lines, "the server got another line")
	fault(t, faults, redistest.Fault{Dir: redistest.ToClient, Data: []byte("held\n"), Held: true})
	c.quiet(t, "a reply while held")
	p.Let()
	got, err := c.reply()
	require.NoError(t, err, "the held reply after Let")
	require.Equal(t, "held", got, "the held reply after Let")
}

func TestProxyReset(t *testing.T) {
	t.Parallel()
	e := startEcho(t)
	p := redistest.StartProxy(t, e.ln.Addr().String())
	c := dial(t, p.Addr())
	c.roundTrip(t, "a")
	p.Reset()
	_, err := c.reply()
	require.Error(t, err, "a reset connection still works")
	require.False(t, isTimeout(err), "a reset connection: %v, want it closed", err)
	dial(t, p.Addr()).roundTrip(t, "b") // a new connection after Reset
}

func TestBlackhole(t *testing.T) {
	t.Parallel()
	h := redistest.StartBlackhole(t)
	faults := h.Faults()
	c := dial(t, h.Addr())
	c.send(t, "PING")
	fault(t, faults, dropped(redistest.ToServer, "PING"))
	c.quiet(t, "a blackhole")
	h.Close()
	_, err := c.reply()
	require.Error(t, err, "a blackhole answered after Close")
	require.False(t, isTimeout(err), "after Close: %v, want the connection closed", err)
}

func isTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }
