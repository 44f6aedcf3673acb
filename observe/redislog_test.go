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
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/observe"
)

// deadAddr returns a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// failDial makes go-redis' pool fail to dial once, which it logs.
func failDial(t *testing.T) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: deadAddr(t), DialerRetries: 1, MaxRetries: -1})
	defer rdb.Close()
	require.Error(t, rdb.Ping(context.Background()).Err(), "Ping to a closed port succeeded")
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
	require.True(t, strings.Contains(out, `level=WARN msg="redis: connection pool: failed to dial`), "go-redis' failed dial was not routed to slog at Warn:\n%s", out)
	require.True(t, strings.Contains(out, "logger=go-redis"), "go-redis' failed dial was not routed to slog at Warn:\n%s", out)
	assert.False(t, strings.Contains(out, "\\n"), "a routed line keeps its newline:\n%s", out)

	buf.Reset()
	quiet := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelError}))
	redis.SetLogger(observe.NewRedisLogger(quiet, slog.LevelWarn))
	failDial(t)
	assert.Equal(t, 0, buf.Len(), "a line below the handler's level was logged:\n%s", buf.String())
	redis.SetLogger(observe.NewRedisLogger(nil, slog.LevelWarn))
	failDial(t) // silenced: nothing to see, and no panic
}
