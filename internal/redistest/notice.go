package redistest

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
)

// Notice wraps m so that, after its tests ran, a package whose real-Redis
// tests were skipped (no redis-server on PATH) says so where a user sees
// it: go test ./... shows a passing package's output only with -v, so the
// notice goes to the terminal (/dev/tty) as well as to stderr. Use it in
// TestMain: goleak.VerifyTestMain(redistest.Notice(m)).
func Notice(m *testing.M) interface{ Run() int } { return notice{m} }

type notice struct{ m *testing.M }

func (n notice) Run() int {
	code := n.m.Run()
	if os.Getenv(RequireEnv) == "1" {
		return code
	}
	var msg string
	if _, err := exec.LookPath("redis-server"); err != nil {
		msg = fmt.Sprintf("note: %s: tests against a real redis-server were skipped (none on PATH; %s=1 makes that a failure)\n",
			packageName(), RequireEnv)
	} else if _, err := exec.LookPath("redis-cli"); err != nil {
		msg = fmt.Sprintf("note: %s: tests against a real Redis Cluster, if any, were skipped (no redis-cli on PATH; %s=1 makes that a failure)\n",
			packageName(), RequireEnv)
	} else {
		return code
	}
	fmt.Fprint(os.Stderr, msg)
	if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
		fmt.Fprint(tty, msg)
		tty.Close()
	}
	return code
}

// packageName is the directory of the test binary's package.
func packageName() string {
	if wd, err := os.Getwd(); err == nil {
		return wd
	}
	return "this package"
}

// Parallel lets n tests of the package run at once (go test's -parallel),
// unless the command line sets -parallel: tests that wait for servers,
// networks and timers far more than they compute can run many more at a
// time than go test's default, the CPU count. Call it in TestMain, before
// m.Run.
func Parallel(n int) {
	if !flag.Parsed() {
		flag.Parse()
	}
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", strconv.Itoa(n))
	}
}
