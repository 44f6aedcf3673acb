// Package proctest runs the test binary again as child processes, for tests
// that need several real processes (one to SIGKILL or SIGSTOP, say): the
// parent starts a child that runs one test function, reads the lines the
// child emits and writes lines to its stdin.
//
// A child test looks like:
//
//	func TestWorkerProcess(t *testing.T) {
//		spec, ok := proctest.Child("worker")
//		if !ok {
//			t.Skip("only runs as a child process")
//		}
//		proctest.Emit("READY %s", spec)
//		for line := range proctest.Commands() { ... }
//	}
//
// and the parent calls proctest.Start(t, "TestWorkerProcess", "worker", spec).
//
// No child outlives its test, whichever way the test ends: it is killed
// when the test ends (a cleanup), and it dies with the test binary, even
// one killed with SIGKILL (internal/lifeline: Pdeathsig, and the child's
// watch on a pipe from its parent).
package proctest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/internal/lifeline"
)

// roleEnv names the role of a child process; specEnv carries its spec.
const (
	roleEnv = "PROCTEST_ROLE"
	specEnv = "PROCTEST_SPEC"
	prefix  = "@@proctest "
)

// Timeout bounds the wait for one line of a child: long enough for a -race
// binary to start on a loaded machine, short enough to fail a hung test.
const Timeout = 60 * time.Second

// Child reports whether this process is a child with the given role, and
// its spec.
func Child(role string) (spec string, ok bool) {
	if os.Getenv(roleEnv) != role {
		return "", false
	}
	return os.Getenv(specEnv), true
}

// Idle is the body of a child test that runs until it is killed: it says
// READY and blocks. It ignores the end of its stdin (its parent's death
// closes it): only its lifeline or Pdeathsig ends it, for tests of those.
// Run as no child of role, it skips t.
func Idle(t testing.TB, role string) {
	if _, ok := Child(role); !ok {
		t.Skip("only runs as a child process")
	}
	Emit("READY")
	// Blocks for good. A pending timer keeps the runtime from taking the
	// wait for a deadlock (select {} alone can end the process with "all
	// goroutines are asleep").
	<-time.NewTimer(math.MaxInt64).C
}

var emitMu sync.Mutex

// Emit writes one line to the parent. It is safe for concurrent use.
func Emit(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	emitMu.Lock()
	defer emitMu.Unlock()
	fmt.Fprintln(os.Stdout, prefix+strings.ReplaceAll(line, "\n", " "))
}

// Commands returns the lines the parent sends, closed when the parent
// closes the child's stdin (or exits).
func Commands() <-chan string {
	ch := make(chan string)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			ch <- sc.Text()
		}
	}()
	return ch
}

// Proc is the parent's handle on a child process.
type Proc struct {
	Name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	done  chan struct{} // closed when the process has exited
	err   error         // its exit status, set before done is closed
}

// Start runs the test binary as a child that runs only the test function
// test, in role with spec. The child is killed, if still running, when
// the test ends; its stderr goes to the parent's.
func Start(t testing.TB, test, role, spec string) *Proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), roleEnv+"="+role, specEnv+"="+spec)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, lifeline.StartWatched(cmd), "start %s", role)
	p := &Proc{Name: fmt.Sprintf("%s[%d]", role, cmd.Process.Pid), cmd: cmd, stdin: stdin, lines: make(chan string, 1024), done: make(chan struct{})}
	read := make(chan struct{})
	go func() {
		defer close(read)
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			if l, ok := strings.CutPrefix(sc.Text(), prefix); ok {
				p.lines <- l
			}
		}
	}()
	go func() {
		<-read // Wait closes stdout: read it to the end first
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = stdin.Close()
		go func() { // lines nobody read must not block the reader
			for range p.lines {
			}
		}()
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// Next returns the next line of the child; it fails t if the child exits
// first or says nothing for Timeout.
func (p *Proc) Next(t testing.TB) string {
	t.Helper()
	select {
	case l, ok := <-p.lines:
		if !ok {
			<-p.done
			require.Failf(t, "child exited early", "%s: %v", p.Name, p.err)
		}
		return l
	case <-time.After(Timeout):
		require.Failf(t, "child silent", "%s said nothing for %v", p.Name, Timeout)
	}
	return ""
}

// Pid is the child's process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Lines returns the child's lines; the channel is closed when the child's
// stdout ends.
func (p *Proc) Lines() <-chan string { return p.lines }

// Send writes one line to the child's stdin.
func (p *Proc) Send(t testing.TB, line string) {
	t.Helper()
	_, err := io.WriteString(p.stdin, line+"\n")
	require.NoError(t, err, "%s: send %q", p.Name, line)
}

// CloseStdin closes the child's stdin: Commands ends in the child.
func (p *Proc) CloseStdin() { _ = p.stdin.Close() }

// Signal sends sig to the child.
func (p *Proc) Signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(sig), "%s: signal %v", p.Name, sig)
}

// Wait waits for the child to exit and returns its exit status; it fails t
// after Timeout.
func (p *Proc) Wait(t testing.TB) error {
	t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(Timeout):
		require.Failf(t, "child still running", "%s did not exit within %v", p.Name, Timeout)
	}
	return nil
}

// CombinedOutput runs cmd (a test binary run again, or any program) to
// its end, as cmd.CombinedOutput does, as a child that dies with the test:
// it is killed if the test ends first, and dies with the test binary (a
// child that runs Go code linking internal/lifeline also watches its
// parent). It is safe to call from goroutines other than the test's: it
// fails no test itself.
func CombinedOutput(t testing.TB, cmd *exec.Cmd) ([]byte, error) {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := lifeline.StartWatched(cmd); err != nil {
		return nil, err
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			_ = cmd.Process.Kill()
			<-done
		}
	})
	err := cmd.Wait()
	close(done)
	return out.Bytes(), err
}
