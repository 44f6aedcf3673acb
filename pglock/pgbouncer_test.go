package pglock_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	osuser "os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/internal/lifeline"
	"github.com/redislock-go/redislock/lease/leasetest"
	"github.com/redislock-go/redislock/pglock"
)

// startPgBouncer starts a PgBouncer in transaction pooling mode on a free
// loopback port in front of the test database, stopped at the end of t,
// and returns the DSN through it; users may log in besides the DSN's. It
// skips without pgbouncer on PATH (or in /usr/sbin), unless
// REDISLOCK_REQUIRE_PGBOUNCER=1.
func startPgBouncer(t *testing.T, users ...string) string {
	t.Helper()
	needPostgres(t)
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/pgbouncer"); serr == nil {
			bin, err = "/usr/sbin/pgbouncer", nil
		}
	}
	if err != nil {
		require.NotEqual(t, "1", os.Getenv("REDISLOCK_REQUIRE_PGBOUNCER"), "pgbouncer not found (REDISLOCK_REQUIRE_PGBOUNCER=1)")
		t.Skip("pgbouncer not found: the tests behind a transaction pooler skip")
	}
	u, err := url.Parse(dsn())
	require.NoError(t, err)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	// Not t.TempDir: its parent is private, and pgbouncer runs as
	// another user when started as root.
	dir, err := os.MkdirTemp("", "pglock-pgbouncer-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o777))
	user := u.User.Username()
	var authFile strings.Builder
	for _, name := range append([]string{user}, users...) {
		authFile.WriteString(strconv.Quote(name) + ` ""` + "\n")
	}
	ini := fmt.Sprintf(`[databases]
* = host=%s port=%s
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
default_pool_size = 4
ignore_startup_parameters = extra_float_digits
logfile = %s
`, u.Hostname(), u.Port(), port, filepath.Join(dir, "users.txt"), filepath.Join(dir, "pgbouncer.log"))
	for name, body := range map[string]string{"pgbouncer.ini": ini, "users.txt": authFile.String()} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
	}
	cmd := exec.Command(bin, filepath.Join(dir, "pgbouncer.ini"))
	if os.Geteuid() == 0 {
		// pgbouncer refuses to run as root: it runs as postgres from its
		// start (its own -u would change its credentials later, which
		// clears the Pdeathsig that makes it die with the test).
		pg, err := osuser.Lookup("postgres")
		require.NoError(t, err)
		uid, _ := strconv.ParseUint(pg.Uid, 10, 32)
		gid, _ := strconv.ParseUint(pg.Gid, 10, 32)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	}
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	require.NoError(t, lifeline.Start(cmd)) // dies with the test, however it ends
	exited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	q := u.Query()
	q.Set("sslmode", "disable")
	through := fmt.Sprintf("postgres://%s@127.0.0.1:%d%s?%s", user, port, u.Path, q.Encode())
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, through)
		cancel()
		if err == nil {
			_ = conn.Close(context.Background())
			return through
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "pgbouncer.log"))
			t.Fatalf("pgbouncer exited: %v\n%s", waitErr, log)
		default:
		}
		require.False(t, time.Now().After(deadline), "pgbouncer on %d does not answer: %v", port, err)
		time.Sleep(20 * time.Millisecond) // waiting for the process to listen; bounded
	}
}

// bouncerPool is a pool through PgBouncer; QueryExecModeExec, since
// PgBouncer 1.18 in transaction mode keeps no prepared statements.
func bouncerPool(t *testing.T, through string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(through)
	require.NoError(t, err)
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p
}

// Behind PgBouncer in transaction mode: the lease suite passes (a session
// is never relied on), RunTx and RunAdvisoryTx work, and session advisory
// locks are refused, declared or not, unless a direct session config is
// given.
func TestBehindPgBouncer(t *testing.T) {
	through := startPgBouncer(t)
	leasetest.Run(t, func(t *testing.T) leasetest.Env {
		table := newTable(t)
		c := newClient(t, bouncerPool(t, through), table, pglock.WithTransactionPooler(true))
		other := newClient(t, bouncerPool(t, through), table, pglock.WithTransactionPooler(true))
		return leasetest.Env{Locker: c.Locker(), Other: other.Locker(), Store: c.Store(), Break: breakOn(t, newPool(t), table)}
	})

	table := newTable(t)
	ctx := ctxFor(t)
	undeclared := newClient(t, bouncerPool(t, through), table)
	if a, err := undeclared.ObtainAdvisory(ctx, []string{"s"}); !errors.Is(err, pglock.ErrSessionRequired) {
		if a != nil {
			_ = a.Release(ctx)
		}
		t.Fatalf("session advisory lock through PgBouncer, undeclared: %v, want ErrSessionRequired", err)
	}
	if pid := advisoryHolder(t, ctx, newPool(t), "s"); pid != 0 {
		t.Fatalf("the refused advisory lock is held by backend %d", pid)
	}
	direct, err := pgx.ParseConfig(dsn())
	require.NoError(t, err)
	c := newClient(t, bouncerPool(t, through), table, pglock.WithTransactionPooler(true), pglock.WithSessionConfig(direct))
	a, err := c.ObtainAdvisory(ctx, []string{"s"})
	require.NoError(t, err, "session advisory lock on the direct session config")
	require.NoError(t, a.Release(ctx))
	require.NoError(t, c.RunTx(ctx, "tx", 10*time.Second, func(ctx context.Context, tx pgx.Tx, l *pglock.Lock) error {
		_, err := tx.Exec(ctx, `SELECT 1`)
		return err
	}), "RunTx through PgBouncer")
	require.NoError(t, c.RunAdvisoryTx(ctx, []string{"x", "y"}, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SELECT 1`)
		return err
	}), "RunAdvisoryTx through PgBouncer")
}
