package main_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/lifeline"
	"github.com/redislock-go/redislock/internal/redistest"
)

// startSentinel starts a Sentinel that monitors master as "mymaster" and
// returns its address.
func startSentinel(t *testing.T, master *redistest.Server) string {
	t.Helper()
	bin := redistest.Binary(t)
	dir := t.TempDir()
	port := freePort(t)
	host, mport, _ := strings.Cut(master.Addr(), ":")
	conf := filepath.Join(dir, "sentinel.conf")
	cfg := fmt.Sprintf("port %s\nbind 127.0.0.1\ndir %s\nsentinel monitor mymaster %s %s 1\n", port, dir, host, mport)
	require.NoError(t, os.WriteFile(conf, []byte(cfg), 0o600))
	cmd := exec.Command(bin, conf, "--sentinel", "--logfile", filepath.Join(dir, "log"))
	if err := lifeline.Start(cmd); err != nil { // dies with the test, however it ends
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := "127.0.0.1:" + port
	sc := redis.NewSentinelClient(&redis.Options{Addr: addr})
	defer sc.Close()
	redistest.Eventually(t, 10*time.Second, "sentinel on "+addr+" knows mymaster", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		a, err := sc.GetMasterAddrByName(ctx, "mymaster").Result()
		return err == nil && len(a) == 2 && a[1] == mport
	})
	return addr
}

func TestSentinel(t *testing.T) {
	srv, c, _ := server(t)
	sentinel := startSentinel(t, srv)
	p := start(t, "--sentinel", "mymaster", "--addr", sentinel, "run", "--holder", "via-sentinel", "k", "--", "sh", "-c", "echo ok; read x || true")
	if got := p.line(); got != "ok" {
		t.Fatalf("run via Sentinel: %q", got)
	}
	if held, holder, _ := inspect(t, c, "k"); !held || holder != "via-sentinel" {
		t.Fatalf("the master does not hold the lock taken through Sentinel: held %v holder %q", held, holder)
	}
	p.stdin.Close()
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d: %s", code, p.stderr.rest())
	}
	code, out, stderr := result(t, "--sentinel", "mymaster", "--addr", "redis://"+sentinel, "inspect", "k")
	require.Equal(t, 0, code, "inspect via a Sentinel URL: exit %d %s %s", code, out, stderr)
	require.True(t, strings.Contains(out, "k "), "inspect via a Sentinel URL: exit %d %s %s", code, out, stderr)
	if code, _, stderr := result(t, "--sentinel", "nosuchmaster", "--addr", sentinel, "run", "--nonblock", "k", "--", "true"); code != 69 {
		t.Errorf("unknown master: exit %d (%s), want 69", code, stderr)
	}
}

func TestQuorum(t *testing.T) {
	srvs := redistest.StartN(t, 3)
	var addrs []string
	var rdbs []redis.UniversalClient
	for _, s := range srvs {
		addrs = append(addrs, s.Addr())
		rdbs = append(rdbs, s.Client(nil))
	}
	q, err := redislock.NewQuorum(rdbs)
	require.NoError(t, err)
	defer q.Close()
	srvs[2].Kill() // a minority down: the lock is still taken
	p := start(t, "--quorum", strings.Join(addrs, ","), "run", "--holder", "q", "k", "--", "sh", "-c", "echo ok; read x || true")
	if got := p.line(); got != "ok" {
		t.Fatalf("run in quorum mode: %q", got)
	}
	info, err := q.Inspect(context.Background(), "k")
	require.NoError(t, err, "quorum Inspect: %+v", info)
	require.True(t, info.Held, "quorum Inspect: %+v %v", info, err)
	require.Equal(t, "q", info.Holder, "quorum Inspect: %+v %v", info, err)
	p.stdin.Close()
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d: %s", code, p.stderr.rest())
	}
	if code, _, _ := result(t, "--quorum", addrs[0], "inspect", "k"); code != 64 {
		t.Errorf("--quorum with one address: exit %d, want 64", code)
	}
	srvs[1].Kill() // no majority
	if code, _, stderr := result(t, "--quorum", strings.Join(addrs, ","), "run", "--nonblock", "k", "--", "true"); code != 69 {
		t.Errorf("no majority: exit %d (%s), want 69", code, stderr)
	}
}
