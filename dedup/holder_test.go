package dedup_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/dedup"
	"github.com/redislock-go/redislock/internal/redistest"
)

// holderEnv makes the re-executed test binary a worker that runs one job:
// "redisAddr|jobID|sinkKey|leaseMillis".
const holderEnv = "DEDUP_HOLDER"

// TestHolderProcess is the worker side of TestPausedHolderFencedOut: it
// runs only in the re-executed binary. Its job reports "RUNNING <fence>",
// waits for a "WRITE" line on stdin (ignoring its ctx, as a job stuck in a
// write path would), makes its fenced write, reports "WRITE <result>" and
// returns success whatever the write's result; then Do's outcome is
// reported as "DONE <error>".
func TestHolderProcess(t *testing.T) {
	spec := os.Getenv(holderEnv)
	if spec == "" {
		t.Skip("only runs as the re-executed worker process")
	}
	f := strings.Split(spec, "|")
	ms, _ := strconv.Atoi(f[3])
	rdb := redis.NewClient(&redis.Options{Addr: f[0]})
	defer rdb.Close()
	c := redislock.New(rdb)
	defer c.Close()
	g, err := dedup.New(c.Locker(), c.Store(), dedup.WithLease(time.Duration(ms)*time.Millisecond), dedup.WithHolder("paused"))
	if err != nil {
		t.Fatal(err)
	}
	in := bufio.NewScanner(os.Stdin)
	_, err = g.Do(context.Background(), f[1], func(ctx context.Context, fence int64) ([]byte, error) {
		fmt.Printf("HOLDER RUNNING %d\n", fence)
		if !in.Scan() || in.Text() != "WRITE" {
			return nil, errors.New("no WRITE")
		}
		werr := redislock.FencedSet(context.Background(), rdb, f[2], "paused", fence, 0)
		fmt.Printf("HOLDER WRITE %q\n", errText(werr))
		return []byte("paused"), nil // as a job that does not check its write would
	})
	fmt.Printf("HOLDER DONE %q\n", errText(err))
}

func errText(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// holderProc is the parent's handle on a worker process.
type holderProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan []string
}

func startHolder(t *testing.T, spec string) *holderProc {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHolderProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), holderEnv+"="+spec)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &holderProc{cmd: cmd, stdin: stdin, lines: make(chan []string, 16)}
	read := make(chan struct{})
	go func() {
		defer close(read)
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "HOLDER "); ok {
				kind, arg, _ := strings.Cut(rest, " ")
				p.lines <- []string{kind, arg}
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		<-read
	})
	return p
}

// next returns the next report of kind, failing t on another or none.
func (p *holderProc) next(t *testing.T, kind string) string {
	t.Helper()
	select {
	case l, ok := <-p.lines:
		if !ok {
			t.Fatalf("worker process exited before %s", kind)
		}
		if l[0] != kind {
			t.Fatalf("worker process reported %s %s, want %s", l[0], l[1], kind)
		}
		return l[1]
	case <-time.After(60 * time.Second): // a -race build starting on a loaded machine
		t.Fatalf("worker process did not report %s", kind)
	}
	return ""
}

// A worker process runs a job and is SIGSTOPped mid-job, past its lease.
// Another worker runs the job (the lease ran out, nothing was recorded),
// writes with its higher fence and records the outcome. The paused worker
// resumes and makes its fenced write: refused; its job returns success,
// whose record is refused too; its Do reports the lost lock and the stale
// fence. Repeats get the successor's outcome.
func TestPausedHolderFencedOut(t *testing.T) {
	srv := redistest.Start(t)
	const (
		id      = "invoice-42"
		sinkKey = "sink:invoice-42"
		lease   = 500 * time.Millisecond
	)
	p := startHolder(t, fmt.Sprintf("%s|%s|%s|%d", srv.Addr(), id, sinkKey, lease.Milliseconds()))
	pausedFence, _ := strconv.ParseInt(p.next(t, "RUNNING"), 10, 64)
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t)
	rdb := srv.Client(nil)
	successor := redisWorkers(t, []*redistest.Server{srv}, 1, dedup.WithWait(50*time.Millisecond))[0]
	r, err := successor.Do(ctx, id, func(ctx context.Context, fence int64) ([]byte, error) {
		return []byte("successor"), redislock.FencedSet(ctx, rdb, sinkKey, "successor", fence, 0)
	})
	if err != nil || !r.Ran || r.Fence <= pausedFence {
		t.Fatalf("successor: %+v, %v; want a run with a fence above %d", r, err, pausedFence)
	}
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(p.stdin, "WRITE\n"); err != nil {
		t.Fatal(err)
	}
	if w := p.next(t, "WRITE"); !strings.Contains(w, redislock.ErrStaleFence.Error()) {
		t.Errorf("the paused worker's write: %s, want ErrStaleFence", w)
	}
	done := p.next(t, "DONE")
	if !strings.Contains(done, redislock.ErrLockLost.Error()) || !strings.Contains(done, redislock.ErrStaleFence.Error()) {
		t.Errorf("the paused worker's Do: %s, want ErrLockLost and ErrStaleFence", done)
	}
	if v, f, err := redislock.FencedGet(ctx, rdb, sinkKey); err != nil || v != "successor" || f != r.Fence {
		t.Errorf("sink: %q at fence %d (%v); want the successor's write at %d", v, f, err, r.Fence)
	}
	again, err := successor.Do(ctx, id, func(context.Context, int64) ([]byte, error) { return nil, errors.New("ran again") })
	if err != nil || again.Ran || string(again.Value) != "successor" || again.Fence != r.Fence {
		t.Errorf("repeat: %+v, %v; want the successor's outcome", again, err)
	}
}
