package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/observe"
	"github.com/redislock-go/redislock/semaphore"
)

// run's defaults.
const (
	defaultTTL   = 10 * time.Second
	defaultGrace = 5 * time.Second
	// releaseTimeout bounds the release at exit.
	releaseTimeout = 5 * time.Second
	// lostReleaseWait bounds the wait for the release after a loss.
	lostReleaseWait = time.Second
)

// The environment of the command.
const (
	envKey   = "REDISLOCK_KEY"
	envFence = "REDISLOCK_FENCE"
	envToken = "REDISLOCK_TOKEN"
)

type runFlags struct {
	ttl          time.Duration
	wait         waitFlag
	grace        time.Duration
	nonblock     bool
	conflictCode int
	conflictSet  bool // -E given: it applies to --wait too
	command      string
	holder       string
	slots        int
	verbose      bool
}

const runLong = `Run COMMAND while holding the lock KEY, renewed in the background.

The lock is the library's: "redislock run KEY" holds the same lock as
Client.Obtain(ctx, "KEY", ...) with the default prefix, so programs and shell
jobs exclude each other. By default run waits for the lock as long as it
takes; --wait bounds the wait and --nonblock does not wait at all. The flags
are flock(1)'s where it has them: -n, -w SECONDS, -E CODE, -c COMMAND.

The command (or -c COMMAND, run by sh -c) runs in its own process group, with
redislock's environment less REDIS_URL (it may hold a password), and with
REDISLOCK_KEY, REDISLOCK_FENCE (the grant's fencing token: pass it to what the
command writes, so that a stale holder's writes can be refused) and
REDISLOCK_TOKEN.
The job is the command and every process it starts. On Linux redislock is
their subreaper and follows each of them, whatever process group or session
it moves to (setsid, setpgid, coreutils timeout, a daemon's double fork).
The lock is renewed every TTL/3 while the job runs. If the lock is lost (a
renewal finds it gone, or no renewal gets through before the lease ends),
every process of the job gets SIGTERM, then SIGKILL after --grace, and run
exits with 125 once none is left. When the command exits, the processes of
the job still running are stopped the same way; once none is left, the lock
is released and run exits with the command's code. SIGINT, SIGTERM and
SIGHUP are forwarded to the command's process group (SIGKILL to the whole
job after --grace); the lock is released once the job is gone.

What can still outlive the lock: a process started for the job by a process
outside it (systemd-run, at, a container runtime, ssh), and, if redislock
itself is killed with SIGKILL, the command's descendants (the kernel kills
the command only). A process of the job that redislock may not signal
(another user's, such as one started by sudo, when redislock is not root)
or that is stuck in the kernel survives SIGKILL: redislock waits for it and
says so, the lock held (unless lost) until it ends. Outside Linux there is
no subreaper: only the command's process group is followed, and a process
that leaves it is neither stopped nor waited for.

With --slots N, run holds one of N slots of the semaphore KEY instead (the
library's semaphore package): at most N commands run at once, and the
command also gets REDISLOCK_SLOT, its slot in [0, N). Fences then grow across
all slots; check them per slot.

Exit codes:
  the command's   the command ran; its exit code (128+N if killed by signal N)
  75              the lock is held by another and --nonblock was given
                  (-E/--conflict-exit-code CODE changes it, as flock -E)
  124             --wait passed and the lock was still held by another
                  (-E CODE, when given, changes it too)
  125             the lock was lost while the job ran; the job was stopped
  126 / 127       the command could not be run / was not found
  64              bad flags or arguments (--slots: the semaphore is in use with another N)
  69              Redis unreachable, an error reply, no quorum
  77              Redis refused the user (ACL NOPERM, bad password)
  128+N           redislock got signal N while waiting for the lock`

const runExample = `  # A cron job that runs on several hosts, once at a time; the others wait:
  redislock run nightly-report -- ./report.sh --month 2026-11

  # Skip the run if another host has it (exit 0 instead of 75), as flock -n -E 0:
  redislock run -n -E 0 db-migrate -- ./migrate.sh

  # Wait at most a minute, on a TLS Redis with an ACL user:
  REDIS_URL=rediss://locker:secret@redis.internal:6380 redislock run -w 60 backup -c 'pg_dump ... > /backup/db.sql'

  # At most 4 transcoders at once, across hosts:
  redislock run --slots 4 transcoders -- ./transcode.sh "$FILE"

  # Pass the fencing token to the resource:
  redislock run invoice-batch -- sh -c 'psql -c "UPDATE batch SET fence = $REDISLOCK_FENCE WHERE fence < $REDISLOCK_FENCE"'`

func runCommand(c *conn) *cobra.Command {
	f := runFlags{ttl: defaultTTL, grace: defaultGrace, conflictCode: exitConflict, slots: 1}
	cmd := &cobra.Command{
		Use:     "run [flags] KEY {-- COMMAND [ARGS...] | -c COMMAND}",
		Short:   "Run a command while holding a lock",
		Long:    runLong,
		Example: runExample,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError("run needs a KEY and a COMMAND (redislock run KEY -- COMMAND ARGS...)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			f.conflictSet = cmd.Flags().Changed("conflict-exit-code")
			return f.run(c, args)
		},
	}
	fs := cmd.Flags()
	fs.SetInterspersed(false) // flags after KEY belong to the command
	fs.DurationVar(&f.ttl, "ttl", f.ttl, "lease of the lock, renewed every TTL/3 while the command runs")
	fs.VarP(&f.wait, "wait", "w", "wait at most `SECONDS` (fractions allowed, or a duration such as 1m30s) for the lock,\nthen exit 124; 0 makes one attempt (default: wait as long as it takes)")
	fs.BoolVarP(&f.nonblock, "nonblock", "n", false, "do not wait: if the lock is held, exit with the conflict code at once")
	fs.DurationVar(&f.grace, "grace", f.grace, "time between SIGTERM and SIGKILL when the job's processes are stopped")
	fs.IntVarP(&f.conflictCode, "conflict-exit-code", "E", f.conflictCode, "exit `CODE` (0-255) when --nonblock finds the lock held (and, when given, when --wait passes)")
	fs.StringVarP(&f.command, "command", "c", "", "run `COMMAND` with sh -c instead of COMMAND ARGS (also as flock has it: KEY -c COMMAND)")
	fs.StringVar(&f.holder, "holder", "", "holder identity recorded with the lock, shown by inspect (default host:pid)")
	fs.IntVar(&f.slots, "slots", 1, "hold one of `N` slots of the semaphore named KEY instead of the lock\n(REDISLOCK_SLOT: the slot, 0 to N-1; every user of KEY must give the same N)")
	fs.BoolVarP(&f.verbose, "verbose", "v", false, "report obtaining, waiting and releasing on stderr, and go-redis' own messages (dial failures)")
	return cmd
}

// check validates the flags and splits args into the key and the command.
func (f *runFlags) check(args []string) (key string, argv []string, err error) {
	key, argv = args[0], args[1:]
	if len(argv) > 0 && argv[0] != "--" && f.command == "" {
		// flock's form, KEY -c COMMAND: flags after KEY are otherwise
		// the command's.
		if c, ok := strings.CutPrefix(argv[0], "--command="); ok {
			f.command, argv = c, argv[1:]
		} else if argv[0] == "-c" || argv[0] == "--command" {
			if len(argv) != 2 {
				return "", nil, usageError("-c takes one COMMAND, run by sh -c (quote it): KEY -c 'COMMAND ARGS...'")
			}
			f.command, argv = argv[1], nil
		}
	}
	if len(argv) > 0 && argv[0] == "--" {
		argv = argv[1:]
	}
	switch {
	case key == "":
		return "", nil, usageError("empty KEY")
	case f.command != "" && len(argv) > 0:
		return "", nil, usageError("-c COMMAND and COMMAND ARGS exclude each other")
	case f.command != "":
		argv = []string{"sh", "-c", f.command}
	case len(argv) == 0:
		return "", nil, usageError("no COMMAND to run (redislock run KEY -- COMMAND ARGS..., or KEY -c 'COMMAND')")
	}
	switch {
	case f.nonblock && f.wait.set:
		return "", nil, usageError("--nonblock and --wait exclude each other")
	case f.grace < 0:
		return "", nil, usageError("--grace %v: must not be negative", f.grace)
	case f.conflictCode < 0 || f.conflictCode > 255:
		return "", nil, usageError("--conflict-exit-code %d: must be 0-255", f.conflictCode)
	case f.slots < 1:
		return "", nil, usageError("--slots %d: must be at least 1", f.slots)
	case f.slots > semaphore.MaxLimit:
		return "", nil, usageError("--slots %d: at most %d slots", f.slots, semaphore.MaxLimit)
	}
	if f.holder == "" {
		f.holder = defaultHolder()
	}
	return key, argv, nil
}

func (f *runFlags) run(c *conn, args []string) error {
	key, argv, err := f.check(args)
	if err != nil {
		return err
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)

	notice := make(waitNotice, 1)
	acq, err := f.acquirer(c, key, notice)
	if err != nil {
		return err
	}
	defer acq.close()
	out := newReporter(f.verbose)
	redisLog.to(out)

	lock, err := f.obtain(acq, key, sigs, notice, out)
	if err != nil {
		return err
	}
	out.verbosef("obtained %q (fence %d, holder %s)", key, lock.Fence(), f.holder)
	held, err := lease.Hold(context.Background(), lock, f.ttl)
	if err != nil {
		_ = lock.Release(context.Background())
		return err
	}
	env := append(childEnv(), envKey+"="+key, envFence+"="+strconv.FormatInt(lock.Fence(), 10), envToken+"="+lock.Token())
	ch, err := startChild(argv, append(env, acq.env(lock)...))
	if err != nil {
		f.release(held, key, out)
		return err
	}
	code := f.supervise(ch, held, sigs, out)
	if code != exitLost {
		f.release(held, key, out)
	}
	return exitWith(code, errQuiet)
}

// acquirer returns what run takes: the lock, or with --slots a slot of the
// semaphore named key.
func (f *runFlags) acquirer(c *conn, key string, notice waitNotice) (acquirer, error) {
	if f.slots == 1 {
		lc, closeClient, err := c.client(redislock.WithHolder(f.holder), redislock.WithObserver(notice))
		if err != nil {
			return nil, err
		}
		return &lockAcquirer{lc: lc, key: key, closeClient: closeClient}, nil
	}
	rdbs, quorum, err := c.clients()
	if err != nil {
		return nil, err
	}
	if quorum {
		closeAll(rdbs)
		return nil, usageError("--slots (a semaphore) needs one Redis: quorum mode is not supported")
	}
	a, err := newSemAcquirer(rdbs[0], key, f.slots, f.holder, c.prefix, notice)
	if err != nil {
		closeAll(rdbs)
		return nil, err
	}
	a.closeClient = func() { closeAll(rdbs) }
	return a, nil
}

// obtain takes the lock (or slot) as the flags say, giving up on a signal.
func (f *runFlags) obtain(acq acquirer, key string, sigs <-chan os.Signal, notice waitNotice, out *reporter) (lease.Lock, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	once := f.nonblock || f.wait.set && f.wait.d == 0
	if f.wait.d > 0 {
		ctx, cancel = context.WithTimeout(ctx, f.wait.d)
		defer cancel()
	}
	var (
		wg  sync.WaitGroup
		sig os.Signal
	)
	wg.Add(1)
	go func() { // owned by obtain: ends with its ctx
		defer wg.Done()
		var stopProgress func()
		defer func() {
			if stopProgress != nil {
				stopProgress()
			}
		}()
		for {
			select {
			case s := <-sigs:
				sig = s
				cancel()
				return
			case <-notice:
				if stopProgress == nil {
					out.verbosef("waiting for %q, %s", key, acq.heldBy())
					stopProgress = out.progress(key, acq.heldBy)
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	var lock lease.Lock
	var err error
	for {
		lock, err = acq.acquire(ctx, f.ttl, once)
		// Waiting as long as it takes: a lock's Obtain waits at most an hour.
		if once || f.wait.set || ctx.Err() != nil || !errors.Is(err, redislock.ErrNotObtained) {
			break
		}
	}
	cancel()
	wg.Wait()
	switch {
	case sig != nil:
		if lock != nil {
			_ = lock.Release(context.Background())
		}
		return nil, exitWith(exitSignal+signum(sig), fmt.Errorf("interrupted by %v while waiting for %q", sig, key))
	case err == nil:
		return lock, nil
	case errors.Is(err, redislock.ErrNotObtained) && f.nonblock:
		return nil, exitWith(f.conflictCode, fmt.Errorf("%q is %s", key, acq.heldBy()))
	case errors.Is(err, redislock.ErrNotObtained):
		code := exitTimeout
		if f.conflictSet {
			code = f.conflictCode
		}
		return nil, exitWith(code, fmt.Errorf("--wait %v passed: %q is %s", f.wait.d, key, acq.heldBy()))
	case errors.Is(err, semaphore.ErrLimitMismatch):
		return nil, exitWith(exitUsage, err)
	}
	return nil, err
}

// supervise waits for the command, the loss of the lock or a signal, and
// returns the exit code.
func (f *runFlags) supervise(ch *child, held *lease.Held, sigs <-chan os.Signal, out *reporter) int {
	var killAt <-chan time.Time
	for {
		select {
		case <-ch.done:
			if ch.leftover() {
				out.warnf("the command exited and left processes behind: stopping them (SIGTERM, SIGKILL after %v)", f.grace)
			}
			ch.stop(f.grace, out) // and wait for the job to be gone
			return ch.exitCode()
		case <-held.Done():
			lost := time.Now()
			out.warnf("lock %q lost (%v): stopping the command (SIGTERM, SIGKILL after %v)", held.Lock().Key(), context.Cause(held.Context()), f.grace)
			ch.stop(f.grace, out)
			out.warnf("the command and its processes stopped %v after the loss", time.Since(lost).Round(time.Millisecond))
			// Gone, or still ours on a Redis that stopped answering:
			// compare-and-delete either way, but do not wait long for a
			// renewal still in flight to a dead server (the lease ends
			// on its own).
			released := make(chan struct{})
			go func() { _ = held.Release(context.Background()); close(released) }()
			select {
			case <-released:
			case <-time.After(lostReleaseWait):
			}
			return exitLost
		case s := <-sigs:
			out.verbosef("got %v: passing it to the command", s)
			ch.signal(s.(syscall.Signal))
			if killAt == nil {
				killAt = time.After(f.grace)
			}
		case <-killAt:
			out.warnf("the command did not stop within --grace %v of the signal: SIGKILL", f.grace)
			ch.kill()
		}
	}
}

func (f *runFlags) release(held *lease.Held, key string, out *reporter) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	switch err := held.Release(ctx); {
	case err == nil:
		out.verbosef("released %q", key)
	case errors.Is(err, redislock.ErrNotHeld):
		out.warnf("lock %q was no longer held at release (its lease ended)", key)
	default:
		out.warnf("release of %q failed (it expires with its lease): %v", key, err)
	}
}

// childEnv is the command's environment before the grant's variables:
// redislock's, less REDIS_URL, which may hold the Redis password.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "REDIS_URL=") {
			env = append(env, kv)
		}
	}
	return env
}

func signum(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return int(n)
	}
	return 0
}

// waitNotice is an Observer that signals when an Obtain starts to wait.
type waitNotice chan struct{}

func (w waitNotice) WaitStart(context.Context, observe.WaitEvent) {
	select {
	case w <- struct{}{}:
	default:
	}
}
