package observe

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
)

// RedisLogger routes go-redis' own log lines to a *slog.Logger: its
// connection pool's failed dials, Sentinel's discoveries and the like,
// which go-redis writes to stderr by default, one or more per failed call
// while Redis is down. Install it with redis.SetLogger:
//
//	redis.SetLogger(observe.NewRedisLogger(logger, slog.LevelWarn)) // route
//	redis.SetLogger(observe.NewRedisLogger(nil, 0))                 // silence
//
// go-redis has one logger per process, not per client, so this is the
// program's choice, made once in main; the library never sets it.
type RedisLogger struct {
	l     *slog.Logger
	level slog.Level
}

// NewRedisLogger returns a go-redis logger that logs each line to l at
// level, with the attribute logger=go-redis; with a nil l it drops every
// line.
func NewRedisLogger(l *slog.Logger, level slog.Level) *RedisLogger {
	return &RedisLogger{l: l, level: level}
}

// Printf logs one go-redis line; it implements go-redis' logger interface.
func (r *RedisLogger) Printf(ctx context.Context, format string, v ...any) {
	if r == nil || r.l == nil || !r.l.Enabled(ctx, r.level) {
		return
	}
	r.l.Log(ctx, r.level, strings.TrimSuffix(fmt.Sprintf(format, v...), "\n"), "logger", "go-redis")
}
