package renew

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/redislock-go/redislock/internal/testkit"
	"github.com/redislock-go/redislock/lease/leasetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// harness runs a Renewer on a fake clock with a BatchFunc that the test
// answers call by call.
type harness struct {
	t      *testing.T
	clock  *leasetest.FakeClock
	r      *Renewer
	calls  chan *fakeCall
	events chan event
	// finished receives a token when a call's outcome has been applied:
	// answer waits for it. (A call that returns unanswered, its context
	// ended, leaves a token too; tests that answer after that must not
	// let a call return unanswered.)
	finished chan struct{}
	// ignoreCtx makes calls wait for their answer even after their context
	// ended, as go-redis does without ContextTimeoutEnabled.
	ignoreCtx bool
}

type fakeCall struct {
	h     *harness
	ctx   context.Context
	group Group
	reqs  []Request
	reply chan reply
}

type reply struct {
	res []Result
	err error
}

// event is a callback of an entry: Renewed (cause nil) or Lost.
type event struct {
	key   string
	until time.Time
	cause error
	at    time.Time // on the fake clock
}

const (
	testTTL      = 3 * time.Second
	testInterval = time.Second
	testDrift    = 32 * time.Millisecond
)

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	h := &harness{t: t, clock: leasetest.NewFakeClock(time.Time{}), calls: make(chan *fakeCall, 10000), events: make(chan event, 200000),
		finished: make(chan struct{}, 10000)}
	cfg.finished = func() { h.finished <- struct{}{} }
	cfg.Clock = h.clock
	cfg.Batch = h.batch
	r, err := New(cfg)
	require.NoError(t, err)
	h.r = r
	t.Cleanup(h.close)
	return h
}

// close closes the Renewer when the test ends. A call still in flight
// then (a retry the test did not wait for: a worker makes its call after
// the clock step that queued it has returned) is answered with errClosed,
// or Close would wait for it for good under ignoreCtx.
func (h *harness) close() {
	stop := make(chan struct{})
	drained := make(chan struct{})
	go func() { // ends when Close has returned
		defer close(drained)
		for {
			select {
			case c := <-h.calls:
				c.reply <- reply{nil, errClosed}
			case <-stop:
				return
			}
		}
	}()
	h.r.Close()
	close(stop)
	<-drained
}

func (h *harness) batch(ctx context.Context, g Group, reqs []Request) ([]Result, error) {
	c := &fakeCall{h: h, ctx: ctx, group: g, reqs: slices.Clone(reqs), reply: make(chan reply, 1)}
	h.calls <- c
	if h.ignoreCtx {
		rep := <-c.reply
		return rep.res, rep.err
	}
	select {
	case rep := <-c.reply:
		return rep.res, rep.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// add adds an entry on key, valid for a TTL from now.
func (h *harness) add(key string, g Group) *Handle {
	h.t.Helper()
	e, err := h.r.Add(h.entry(key, g))
	require.NoError(h.t, err)
	return e
}

func (h *harness) entry(key string, g Group) Entry {
	return Entry{
		Group: g, Key: key, Token: "tok-" + key, TTL: testTTL, Interval: testInterval, Drift: testDrift,
		ValidUntil: h.clock.Now().Add(testTTL - testDrift),
		Renewed:    func(until time.Time) { h.events <- event{key: key, until: until, at: h.clock.Now()} },
		Lost:       func(cause error) { h.events <- event{key: key, cause: cause, at: h.clock.Now()} },
	}
}

// call returns the next call of the BatchFunc.
func (h *harness) call() *fakeCall {
	h.t.Helper()
	return testkit.Recv(h.t, h.calls, "a call of the BatchFunc")
}

// noCall checks that no call is waiting (the steps that could make one have
// all returned: FakeClock.Advance waits for them).
func (h *harness) noCall() {
	h.t.Helper()
	testkit.NoRecv(h.t, h.calls, "a call of the BatchFunc")
}

// event returns the next callback of an entry.
func (h *harness) event() event {
	h.t.Helper()
	return testkit.Recv(h.t, h.events, "a Renewed or Lost callback")
}

// events returns the next n callbacks, by key.
func (h *harness) eventsN(n int) map[string]event {
	h.t.Helper()
	out := make(map[string]event, n)
	for range n {
		e := h.event()
		_, dup := out[e.key]
		require.False(h.t, dup, "two callbacks for %s", e.key)
		out[e.key] = e
	}
	return out
}

// answer makes the call return res, err, and waits until the Renewer has
// applied the outcome.
func (c *fakeCall) answer(res []Result, err error) {
	c.reply <- reply{res, err}
	testkit.Recv(c.h.t, c.h.finished, "the outcome of a call applied")
}

// byKey answers with the result that fn gives each request's key.
func (c *fakeCall) byKey(fn func(key string) Result) {
	res := make([]Result, len(c.reqs))
	for i, r := range c.reqs {
		res[i] = fn(r.Key)
	}
	c.answer(res, nil)
}

// renewAll answers that every request was renewed.
func (c *fakeCall) renewAll() {
	res := make([]Result, len(c.reqs))
	for i := range res {
		res[i].Renewed = true
	}
	c.answer(res, nil)
}

// keys returns the keys of the call's requests, sorted.
func (c *fakeCall) keys() []string {
	var ks []string
	for _, r := range c.reqs {
		ks = append(ks, r.Key)
	}
	slices.Sort(ks)
	return ks
}

func keyN(i int) string { return fmt.Sprintf("k%05d", i) }

var (
	errDown   = fmt.Errorf("node down")
	errClosed = fmt.Errorf("test over")
)
