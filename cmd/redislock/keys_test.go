package main_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A lock and a semaphore never share a key, whatever the prefixes: a
// semaphore beside a lock of the same --prefix and key, and beside a lock
// whose --prefix is the semaphore's followed by "sem:" (the semaphores'
// prefix of earlier versions), runs at once.
func TestRunKeysNeverMeet(t *testing.T) {
	srv, _, _ := server(t)
	hold := `echo held; read x || true`
	for _, lockPrefix := range []string{"app:", "app:sem:"} {
		l := start(t, "--addr", srv.Addr(), "--prefix", lockPrefix, "run", "k", "--", "sh", "-c", hold)
		require.Equal(t, "held", l.line())
		code, _, stderr := result(t, "--addr", srv.Addr(), "--prefix", "app:", "run", "--slots", "2", "--nonblock", "k", "--", "true")
		assert.Equal(t, 0, code, "a semaphore under app: beside a lock under %s: %s", lockPrefix, stderr)
		l.stdin.Close()
		require.Equal(t, 0, l.wait())
	}
}
