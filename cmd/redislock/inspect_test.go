package main_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
)

func TestInspectJSON(t *testing.T) {
	srv, c, _ := server(t)
	ctx := context.Background()
	const ttl = time.Minute
	l, err := c.Obtain(ctx, "report", ttl, redislock.WithHolder("billing-7:4242"))
	require.NoError(t, err)
	defer l.Release(ctx)
	code, out, stderr := result(t, "--addr", srv.Addr(), "inspect", "--json", "report", "free")
	require.Equal(t, 0, code, "exit %d: %s", code, stderr)
	var got []struct {
		Key     string `json:"key"`
		Held    bool   `json:"held"`
		Holder  string `json:"holder"`
		Fence   int64  `json:"fence"`
		TTLms   int64  `json:"ttl_ms"`
		Waiters int    `json:"waiters"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &got), "%s", out)
	require.Len(t, got, 2, "%d entries: %s", len(got), out)
	r, f := got[0], got[1]
	assert.False(t, r.Key != "report" || !r.Held || r.Holder != "billing-7:4242" || r.Fence != l.Fence() || r.TTLms <= 0 || r.TTLms > ttl.Milliseconds(), "report: %+v; want held by billing-7:4242, fence %d, 0 < ttl_ms <= %d", r, l.Fence(), ttl.Milliseconds())
	assert.False(t, f.Key != "free" || f.Held || f.Holder != "" || f.Fence != 0 || f.TTLms != 0, "free: %+v; want not held", f)
	assert.False(t, strings.Contains(out, l.Token()), "inspect shows the token")
	assert.Equal(t, 0, r.Waiters, "report: %d waiters before anyone waits", r.Waiters)

	// A waiter (of another client than the command's) marks the lock.
	wctx, cancel := context.WithCancel(ctx)
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		_, _ = c.Obtain(wctx, "report", ttl, redislock.WithRetry(redislock.LinearBackoff(time.Hour)))
	}()
	redistest.Eventually(t, 10*time.Second, "the waiter reported", func() bool {
		_, out, _ = result(t, "--addr", srv.Addr(), "inspect", "--json", "report")
		return json.Unmarshal([]byte(out), &got) == nil && len(got) == 1 && got[0].Waiters == 1
	})
	cancel()
	<-waited

	code, out, _ = result(t, "--addr", srv.Addr(), "inspect", "report", "free")
	assert.False(t, code != 0 || !strings.Contains(out, "billing-7:4242") || !strings.Contains(out, "HOLDER"), "table: exit %d\n%s", code, out)
	if code, _, _ := result(t, "--addr", srv.Addr(), "inspect"); code != 64 {
		t.Errorf("inspect without keys: exit %d, want 64", code)
	}
	_, err = srv.Do("SET", "redislock:{alien}", "not-a-grant")
	require.NoError(t, err)
	if code, _, stderr := result(t, "--addr", srv.Addr(), "inspect", "alien"); code != 69 || !strings.Contains(stderr, "not written by redislock") {
		t.Errorf("a foreign key: exit %d, %s", code, stderr)
	}
}

func TestDemoEmbedded(t *testing.T) {
	code, out, stderr := result(t, "demo")
	require.Equal(t, 0, code, "exit %d: %s\n%s", code, out, stderr)
	for _, want := range []string{"embedded Redis", "Every job was done exactly once", "REFUSED: stale fence", "it cannot delete worker-B's lock", `"worker-B's report"`} {
		assert.True(t, strings.Contains(out, want), "demo output lacks %q:\n%s", want, out)
	}
	assert.False(t, strings.Contains(out, "UNEXPECTED"), "demo:\n%s", out)
}

func TestDemoRealRedis(t *testing.T) {
	srv, _, rdb := server(t)
	code, out, stderr := result(t, "--addr", srv.Addr(), "demo")
	require.Equal(t, 0, code, "exit %d:\n%s\n%s", code, out, stderr)
	require.False(t, strings.Contains(out, "UNEXPECTED"), "exit %d:\n%s\n%s", code, out, stderr)
	require.False(t, strings.Contains(out, "embedded"), "exit %d:\n%s\n%s", code, out, stderr)
	require.True(t, strings.Contains(out, "REFUSED"), "exit %d:\n%s\n%s", code, out, stderr)
	if keys, err := rdb.Keys(context.Background(), "redislock-demo:*").Result(); err != nil || len(keys) != 0 {
		t.Errorf("demo left records: %v %v", keys, err)
	}
}

func TestHelp(t *testing.T) {
	code, out, _ := result(t, "--help")
	assert.False(t, code != 0 || !strings.Contains(out, "redislock run") || !strings.Contains(out, "inspect") || !strings.Contains(out, "demo"), "--help: exit %d\n%s", code, out)
	code, out, _ = result(t, "run", "--help")
	for _, want := range []string{"Exit codes:", "125", "--conflict-exit-code", "REDISLOCK_FENCE", "--grace"} {
		assert.False(t, code != 0 || !strings.Contains(out, want), "run --help lacks %q (exit %d)", want, code)
	}
}

// The table shows a key or holder with control characters or invalid UTF-8
// escaped (quoted as a Go string): a newline cannot forge a row, an escape
// sequence never reaches the terminal. --json escapes them as JSON does.
func TestInspectTableEscapes(t *testing.T) {
	srv, c, _ := server(t)
	ctx := context.Background()
	for _, tc := range []struct{ key, holder, shown string }{
		{"plain", "cron@host-a", "cron@host-a"},
		{"forged-row", "a\nforged  yes  evil  1  9s  0", `"a\nforged  yes  evil  1  9s  0"`},
		{"colour", "\x1b[31mred\x1b[0m\x07", `"\x1b[31mred\x1b[0m\a"`},
		{"tab", "a\tb", `"a\tb"`},
		{"bad-utf8", "caf\xe9", `"caf\xe9"`},
		{"bidi", "abc\u202edef", `"abc\u202edef"`},
		{"quoted", `"x"`, `"\"x\""`},
		{"key\x1b]0;title\x07", "h", "h"},
	} {
		l, err := c.Obtain(ctx, tc.key, time.Minute, redislock.WithHolder(tc.holder))
		require.NoError(t, err, tc.key)
		code, out, stderr := result(t, "--addr", srv.Addr(), "inspect", tc.key)
		require.Equal(t, 0, code, stderr)
		rows := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		require.Len(t, rows, 2, "%q: the table has a header and one row:\n%s", tc.key, out)
		assert.Contains(t, rows[1], " "+tc.shown+" ", "%q: the holder as shown", tc.key)
		assert.NotContains(t, out, "\x1b", "%q: an escape character reached the output", tc.key)
		assert.NotContains(t, out, "\x07", "%q: a bell reached the output", tc.key)
		assert.True(t, utf8.ValidString(out), "%q: the output is valid UTF-8", tc.key)

		_, out, _ = result(t, "--addr", srv.Addr(), "inspect", "--json", tc.key)
		var got []struct{ Key, Holder string }
		require.NoError(t, json.Unmarshal([]byte(out), &got))
		require.Len(t, got, 1)
		if utf8.ValidString(tc.holder) { // JSON carries valid UTF-8 only
			assert.Equal(t, tc.holder, got[0].Holder, "--json: the holder as recorded")
		}
		assert.Equal(t, tc.key, got[0].Key)
		require.NoError(t, l.Release(ctx))
	}
	// The key too: its row starts with it, quoted.
	l, err := c.Obtain(ctx, "two\nlines", time.Minute)
	require.NoError(t, err)
	defer l.Release(ctx)
	_, out, _ := result(t, "--addr", srv.Addr(), "inspect", "two\nlines")
	rows := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, rows, 2, out)
	assert.True(t, strings.HasPrefix(rows[1], `"two\nlines" `), "the key as shown: %q", rows[1])
}
