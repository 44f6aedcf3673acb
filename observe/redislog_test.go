package observe_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"

	"github.com/redislock-go/redislock/observe"
)

// deadAddr returns a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// failDial makes go-redis' pool fail to dial once, which it logs.
func failDial(t *testing.T) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: deadAddr(t), DialerRetries: 1, MaxRetries: -1})
	defer rdb.Close()
	if err := rdb.Ping(context.Background()).Err(); err == nil {
		t.Fatal("Ping to a closed port succeeded")
	}
}

// go-redis' own lines go to the slog.Logger given, at the level given;
// with a nil logger they are dropped.
func TestRedisLogger(t *testing.T) { // not parallel: go-redis' logger is global
	t.Cleanup(logging.Enable) // go-redis' default logger again
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	redis.SetLogger(observe.NewRedisLogger(l, slog.LevelWarn))
	failDial(t)
	out := buf.String()
	if !strings.Contains(out, `level=WARN msg="redis: connection pool: failed to dial`) || !strings.Contains(out, "logger=go-redis") {
		t.Fatalf("go-redis' failed dial was not routed to slog at Warn:\n%s", out)
	}
	if strings.Contains(out, "\\n") {
		t.Errorf("a routed line keeps its newline:\n%s", out)
	}

	buf.Reset()
	quiet := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelError}))
	redis.SetLogger(observe.NewRedisLogger(quiet, slog.LevelWarn))
	failDial(t)
	if buf.Len() != 0 {
		t.Errorf("a line below the handler's level was logged:\n%s", buf.String())
	}
	redis.SetLogger(observe.NewRedisLogger(nil, slog.LevelWarn))
	failDial(t) // silenced: nothing to see, and no panic
}
