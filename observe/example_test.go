package observe_test

import (
	"log/slog"
	"os"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock/observe"
)

// go-redis writes its own lines (a failed dial per call while Redis is
// down, Sentinel's discoveries) to stderr. A program routes them through
// its slog.Logger, or drops them, once in main.
func ExampleNewRedisLogger() {
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	redis.SetLogger(observe.NewRedisLogger(logger, slog.LevelWarn)) // to logger, at Warn
	redis.SetLogger(observe.NewRedisLogger(nil, 0))                 // or dropped
}
