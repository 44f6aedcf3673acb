package lockbench

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redislock-go/redislock/pglock"
)

// Backends the libraries run on (--backend).
const (
	BackendRedis    = "redis"
	BackendPostgres = "postgres"
)

// defaultDSN is the PostgreSQL of --backend postgres without --dsn:
// $REDISLOCK_POSTGRES_DSN, else the local test database.
func defaultDSN() string {
	if d := os.Getenv("REDISLOCK_POSTGRES_DSN"); d != "" {
		return d
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

func bindBackendFlags(fs *flag.FlagSet, c *Config) {
	fs.StringVar(&c.Backend, "backend", c.Backend, "lock service: redis (the libraries on Redis) or postgres (pglock on PostgreSQL: uncontended, hotkey, renew)")
	fs.StringVar(&c.DSN, "dsn", c.DSN, "postgres: the database (default $REDISLOCK_POSTGRES_DSN, else the local test database); the tool works in a schema of its own and drops it")
}

func (c *Config) validateBackend() error {
	switch c.Backend {
	case "", BackendRedis:
		if c.DSN != "" {
			return errors.New("--dsn needs --backend postgres")
		}
	case BackendPostgres:
		if c.Addr != "" || len(c.Quorum) > 0 || c.Spawn > 0 || c.Miniredis {
			return errors.New("--backend postgres excludes --addr, --quorum, --spawn and --miniredis")
		}
	default:
		return fmt.Errorf("unknown backend %q (redis, postgres)", c.Backend)
	}
	return nil
}

// libBackend is the backend a library runs on.
func libBackend(l Library) string {
	if l.Postgres != nil {
		return BackendPostgres
	}
	return BackendRedis
}

func filterBackend(libs []Library, backend string) []Library {
	if backend == "" {
		backend = BackendRedis
	}
	var out []Library
	for _, l := range libs {
		if libBackend(l) == backend {
			out = append(out, l)
		}
	}
	return out
}

// pgTarget is the PostgreSQL the postgres libraries share: one pool,
// counted by a tracer, and a schema of the run's own.
type pgTarget struct {
	pool   *pgxpool.Pool
	schema string
}

func (p *pgTarget) table() string { return p.schema + ".leases" }

// countTracer counts the statements the libraries send.
type countTracer struct{ n *atomic.Int64 }

func (c countTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (countTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func openPostgres(ctx context.Context, cfg *Config) (*target, error) {
	dsn := cfg.DSN
	if dsn == "" {
		dsn = defaultDSN()
	}
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("lockbench: --dsn: %w", err)
	}
	t := &target{}
	pc.MaxConns = int32(cfg.PoolSize)
	if pc.MaxConns == 0 {
		pc.MaxConns = int32(10 * runtime.GOMAXPROCS(0)) // as go-redis' default pool
	}
	pc.ConnConfig.Tracer = countTracer{&t.sent}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var version string
	if err := pool.QueryRow(pctx, "SHOW server_version").Scan(&version); err != nil {
		pool.Close()
		return nil, fmt.Errorf("lockbench: postgres at %s: %w", pc.ConnConfig.Host, err)
	}
	schema := "lockbench_" + strings.ToLower(rand.Text()[:10])
	if _, err := pool.Exec(pctx, "CREATE SCHEMA "+schema); err != nil {
		pool.Close()
		return nil, fmt.Errorf("lockbench: postgres: %w", err)
	}
	t.pg = &pgTarget{pool: pool, schema: schema}
	host := fmt.Sprintf("%s:%d", pc.ConnConfig.Host, pc.ConnConfig.Port)
	t.info = TargetInfo{Kind: BackendPostgres, Real: true, Nodes: []string{host}, PoolSize: int(pc.MaxConns),
		Label: fmt.Sprintf("PostgreSQL %s (%s)", strings.Fields(version)[0], host)}
	return t, nil
}

func (p *pgTarget) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = p.pool.Exec(ctx, "DROP SCHEMA "+p.schema+" CASCADE")
	p.pool.Close()
}

// Postgres returns the adapters of pglock, this repository's PostgreSQL
// backend (--backend postgres).
func Postgres() []Library {
	return []Library{
		{
			Name: "pglock/linear-1ms", Primary: true,
			Note:     "pglock.LinearBackoff(1ms), notified waiting (LISTEN/NOTIFY); Run for renew",
			Postgres: pgWith(pglock.WithRetry(pglock.LinearBackoff(LinearDelay))),
		},
		{
			Name:     "pglock/exp",
			Note:     "pglock.ExponentialBackoff(2ms, 64ms) (jittered), notified waiting",
			Postgres: pgWith(pglock.WithRetry(pglock.ExponentialBackoff(ExpMin, ExpMax))),
		},
		{
			Name:     "pglock/exp-poll",
			Note:     "pglock.ExponentialBackoff(2ms, 64ms), WithNotify(false): polling only",
			Postgres: pgWith(pglock.WithRetry(pglock.ExponentialBackoff(ExpMin, ExpMax)), pglock.WithNotify(false)),
		},
	}
}

func pgWith(opts ...pglock.ClientOption) func(*pgxpool.Pool, string) (Locker, error) {
	return func(pool *pgxpool.Pool, table string) (Locker, error) {
		c, err := pglock.New(context.Background(), pool, append([]pglock.ClientOption{pglock.WithTable(table)}, opts...)...)
		if err != nil {
			return nil, err
		}
		return &pgLocker{c}, nil
	}
}

type pgLocker struct{ c *pglock.Client }

func (p *pgLocker) Obtain(ctx context.Context, key string, ttl time.Duration) (Held, error) {
	l, err := p.c.Obtain(ctx, key, ttl)
	if errors.Is(err, pglock.ErrNotObtained) {
		return nil, errors.Join(ErrBusy, err)
	}
	if err != nil {
		return nil, err
	}
	return l, nil
}

func (p *pgLocker) Hold(ctx context.Context, key string, ttl time.Duration, fn func(context.Context) error) error {
	return p.c.Run(ctx, key, ttl, func(ctx context.Context, _ *pglock.Lock) error { return fn(ctx) })
}

func (p *pgLocker) Close() error { return p.c.Close() }
