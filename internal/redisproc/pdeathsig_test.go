//go:build linux

package redisproc

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const helperEnv = "REDISPROC_HELPER"

// helperProcess runs in a re-executed test binary: it starts a server,
// prints its PID and waits to be killed.
func helperProcess() {
	s, err := Start(Config{Dir: os.Getenv(helperEnv)})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println(s.PID())
	select {}
}

// A server outlives neither a crashed nor a killed parent: the test
// binary is re-executed, starts a server, and is killed with SIGKILL (no
// cleanup runs); the server must die too.
func TestDiesWithParent(t *testing.T) {
	t.Parallel()
	need(t, "redis-server")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+t.TempDir()) // its data directory
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("helper: %q, %v", line, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("helper: %q", line)
	}
	if !alive(pid) {
		t.Fatalf("server %d not running before its parent died", pid)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = poll(ctx, "server gone with its parent", func(context.Context) (bool, string) {
		return !alive(pid), fmt.Sprintf("pid %d alive", pid)
	})
	if err != nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Fatal(err)
	}
}

// alive reports whether pid runs (a zombie has exited).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) state ...: comm may contain spaces; the state follows ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z'
}
