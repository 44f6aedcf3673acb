package redislock_test

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Client-only options (WithObserver, WithLogger) do not compile as per-call
// options, while every Option is accepted by New. The calls are
// type-checked against the package's compiled export data.
func TestClientOnlyOptionsDoNotCompilePerCall(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-export", "-deps", "-f", "{{.ImportPath}}={{.Export}}", ".").Output()
	require.NoError(t, err, "go list -export")
	exports := make(map[string]string)
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if path, file, ok := strings.Cut(line, "="); ok && file != "" {
			exports[path] = file
		}
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) { return os.Open(exports[path]) })
	for _, c := range []struct {
		call    string
		compile bool
	}{
		{`redislock.New(rdb, redislock.WithRetry(redislock.NoRetry()))`, true},
		{`redislock.New(rdb, redislock.WithLogger(slog.Default()), redislock.WithObserver(nil))`, true},
		{`c.Obtain(ctx, "k", time.Second, redislock.WithRetry(redislock.NoRetry()))`, true},
		{`c.Obtain(ctx, "k", time.Second, redislock.WithLogger(slog.Default()))`, false},
		{`c.Run(ctx, "k", time.Second, nil, redislock.WithObserver(nil))`, false},
		{`c.ObtainMulti(ctx, nil, time.Second, redislock.WithLogger(slog.Default()))`, false},
	} {
		src := `package p
import (
	"context"
	"log/slog"
	"time"
	"github.com/redis/go-redis/v9"
	"github.com/redislock-go/redislock"
)
var _ = slog.Default
var _ = time.Second
func f(ctx context.Context, rdb redis.UniversalClient, c *redislock.Client) { ` + c.call + ` }
`
		f, err := parser.ParseFile(fset, "p.go", src, 0)
		require.NoError(t, err)
		_, err = (&types.Config{Importer: imp}).Check("p", fset, []*ast.File{f}, nil)
		assert.Equal(t, c.compile, (err == nil), "%s: compiles = %v (%v), want %v", c.call, err == nil, err, c.compile)
	}
}
