package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/redislock-go/redislock/internal/redistest"
)

// Fault is one injectable fault: Inject starts it, Heal ends it. Both run
// off the test goroutine and report errors instead of failing the test.
type Fault struct {
	Name   string
	Inject func() error
	Heal   func() error
}

// KillRestart kills the node with SIGKILL and restarts it on the same port
// and data directory when healed: without persistence it comes back empty;
// with --appendonly yes --appendfsync always it reloads every acknowledged
// write.
func KillRestart(name string, s *redistest.Server) Fault {
	return Fault{Name: "kill-restart " + name,
		Inject: func() error { s.Kill(); return nil },
		Heal:   s.Revive}
}

// PauseNode sends SIGSTOP to the redis-server, SIGCONT when healed.
func PauseNode(name string, s *redistest.Server) Fault {
	return Fault{Name: "sigstop " + name,
		Inject: func() error { s.Pause(); return nil },
		Heal:   func() error { s.Resume(); return nil }}
}

// ClientPause runs CLIENT PAUSE <d> ALL: the server keeps accepting
// connections but holds every client's commands for d.
func ClientPause(name string, s *redistest.Server, d time.Duration) Fault {
	return Fault{Name: "client-pause " + name,
		Inject: func() error {
			_, err := s.Do("CLIENT", "PAUSE", d.Milliseconds(), "ALL")
			return err
		},
		Heal: func() error {
			_, err := s.Do("CLIENT", "UNPAUSE")
			return err
		}}
}

// DebugSleep runs DEBUG SLEEP for d (the server must be started with
// --enable-debug-command local): the whole server blocks. Heal waits for it.
func DebugSleep(name string, s *redistest.Server, d time.Duration) Fault {
	var done chan error
	return Fault{Name: "debug-sleep " + name,
		Inject: func() error {
			done = make(chan error, 1)
			go func() {
				_, err := s.Do("DEBUG", "SLEEP", fmt.Sprintf("%.3f", d.Seconds()))
				done <- err
			}()
			return nil
		},
		Heal: func() error { return <-done }}
}

// ClockJump emulates the node's clock jumping forward past the lease: the
// lock key's PTTL is cut to 1 ms, so it expires early on that node.
func ClockJump(name string, s *redistest.Server, redisKey string) Fault {
	return Fault{Name: "clock-jump " + name,
		Inject: func() error {
			_, err := s.Do("PEXPIRE", redisKey, 1)
			return err
		},
		Heal: func() error { return nil }}
}

// Toxic adds a toxiproxy toxic (JSON, see toxiproxy's docs) while injected.
func Toxic(name string, p *Proxy, toxicJSON string) Fault {
	var toxicName string
	return Fault{Name: name + " " + p.Name,
		Inject: func() error {
			w, err := p.P.Toxics.AddToxicJson(strings.NewReader(toxicJSON))
			if err != nil {
				return err
			}
			toxicName = w.Name
			return nil
		},
		Heal: func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return p.P.Toxics.RemoveToxic(ctx, toxicName)
		}}
}

// Latency delays the server's replies by ms ± jitter.
func Latency(p *Proxy, ms, jitter int) Fault {
	return Toxic("latency", p, fmt.Sprintf(`{"name":"lat","type":"latency","stream":"downstream","attributes":{"latency":%d,"jitter":%d}}`, ms, jitter))
}

// Blackhole drops everything the client sends, keeping connections open.
func Blackhole(p *Proxy) Fault {
	return Toxic("blackhole", p, `{"name":"bh","type":"timeout","stream":"upstream","attributes":{"timeout":0}}`)
}

// ResetPeer resets connections as soon as the server answers (TCP RST): the
// command ran, the client gets an error.
func ResetPeer(p *Proxy) Fault {
	return Toxic("reset-peer", p, `{"name":"rst","type":"reset_peer","stream":"downstream","attributes":{"timeout":0}}`)
}

// Proxy is an in-process toxiproxy in front of one redis-server.
type Proxy struct {
	Name string
	P    *toxiproxy.Proxy
}

// Addr is where clients connect.
func (p *Proxy) Addr() string { return p.P.Listen }

var (
	proxyServerOnce sync.Once
	proxyServer     *toxiproxy.ApiServer
)

// NewProxy starts a proxy to upstream on a free loopback port, stopped when
// the test ends.
func NewProxy(tb testing.TB, name, upstream string) *Proxy {
	tb.Helper()
	proxyServerOnce.Do(func() {
		proxyServer = toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	})
	p := toxiproxy.NewProxy(proxyServer, name, "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		tb.Fatalf("toxiproxy %s: %v", name, err)
	}
	tb.Cleanup(p.Stop)
	return &Proxy{Name: name, P: p}
}

// ClientOptions are the go-redis options the suite uses for lock clients:
// short timeouts that the ctx also bounds, so a paused server costs a
// bounded wait.
func ClientOptions(addr string) *redis.Options {
	return &redis.Options{
		Addr:                  addr,
		DialTimeout:           300 * time.Millisecond,
		ReadTimeout:           300 * time.Millisecond,
		WriteTimeout:          300 * time.Millisecond,
		ContextTimeoutEnabled: true,
		PoolSize:              32,
	}
}

// NewClient is a go-redis client with ClientOptions, closed when the test ends.
func NewClient(tb testing.TB, addr string) *redis.Client {
	c := redis.NewClient(ClientOptions(addr))
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Nemesis injects faults one at a time: wait gap, inject one fault chosen at
// random, hold it, heal it; until ctx is done or max faults were injected.
// Every fault is recorded in h. Heal always runs, also after ctx is done.
type Nemesis struct {
	Faults []Fault
	Gap    time.Duration // between faults
	Hold   time.Duration // how long a fault lasts
	Max    int           // bound on injected faults (0: 1000)
	Seed   uint64
}

// Run blocks until done and returns the number of faults injected.
func (n Nemesis) Run(ctx context.Context, h *History) int {
	if len(n.Faults) == 0 {
		return 0
	}
	maxFaults := n.Max
	if maxFaults == 0 {
		maxFaults = 1000
	}
	rng := rand.New(rand.NewPCG(n.Seed, 7))
	count := 0
	for count < maxFaults {
		select {
		case <-ctx.Done():
			return count
		case <-time.After(n.Gap):
		}
		f := n.Faults[rng.IntN(len(n.Faults))]
		rec := FaultRecord{Name: f.Name, Start: h.Now()}
		err := f.Inject()
		count++
		if err == nil {
			select {
			case <-ctx.Done():
			case <-time.After(n.Hold):
			}
		}
		if herr := f.Heal(); herr != nil && err == nil {
			err = herr
		}
		rec.End = h.Now()
		if err != nil {
			rec.Err = err.Error()
		}
		h.AddFault(rec)
	}
	return count
}
