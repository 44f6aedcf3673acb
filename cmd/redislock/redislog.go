package main

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// redisLog takes go-redis' own log lines (its connection pool's dial
// failures, among others), which it would otherwise write to stderr on its
// own, several for one failed call: they are redislock's messages, shown
// with run -v, dropped otherwise. The error that ends a command is reported
// once, by redislock.
var redisLog redisLogger

func init() { redis.SetLogger(&redisLog) }

type redisLogger struct {
	out atomic.Pointer[reporter]
}

// to routes the lines to r's -v messages.
func (l *redisLogger) to(r *reporter) { l.out.Store(r) }

func (l *redisLogger) Printf(_ context.Context, format string, args ...any) {
	if r := l.out.Load(); r != nil {
		r.verbosef("%s", strings.TrimSpace(fmt.Sprintf(format, args...)))
	}
}
