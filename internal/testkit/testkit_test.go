package testkit_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/redislock-go/redislock/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The context has a deadline within Bound and ends with the test.
func TestContext(t *testing.T) {
	var ctx context.Context
	t.Run("inner", func(t *testing.T) {
		ctx = testkit.Context(t)
		end, ok := ctx.Deadline()
		require.True(t, ok, "no deadline")
		assert.WithinDuration(t, time.Now().Add(testkit.Bound), end, testkit.Bound)
		require.NoError(t, ctx.Err())
	})
	require.ErrorIs(t, ctx.Err(), context.Canceled, "the context outlived its test")
}

func TestRecv(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 7
	require.Equal(t, 7, testkit.Recv(t, ch))
	testkit.NoRecv(t, ch)
	close(ch)
	require.Zero(t, testkit.Recv(t, ch), "a closed channel gives the zero value")
}

// NoRecv and Recv fail their test: on a value ready, and on nothing
// received within the bound (here a deadline a second away).
func TestFailures(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 1
	f := &fake{T: t}
	f.run(func() { testkit.NoRecv(f, ch) })
	require.True(t, f.failed, "NoRecv passed with a value ready")

	f = &fake{T: t, deadline: time.Now()} // the bound is then its floor, a second
	f.run(func() { testkit.Recv(f, make(chan int)) })
	require.True(t, f.failed, "Recv passed with nothing sent")
}

// fake is a testing.TB whose failures end the function fake.run runs, not
// the test; it may carry a deadline.
type fake struct {
	*testing.T
	deadline time.Time
	failed   bool
}

func (f *fake) Deadline() (time.Time, bool) { return f.deadline, !f.deadline.IsZero() }
func (f *fake) Errorf(string, ...any)       { f.failed = true }
func (f *fake) Fatalf(string, ...any)       { f.failed = true; runtime.Goexit() }
func (f *fake) FailNow()                    { f.failed = true; runtime.Goexit() }
func (f *fake) Helper()                     {}

func (f *fake) run(fn func()) {
	done := make(chan struct{})
	go func() { // ends with fn, or at a failure
		defer close(done)
		fn()
	}()
	<-done
}
