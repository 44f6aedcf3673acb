package renew

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redislock-go/redislock/lease"
)

// Defaults, all in one place.
const (
	// DefaultBatchSize is the most requests per call of the BatchFunc.
	DefaultBatchSize = 512
	// DefaultPerNode is the most calls in flight to one node.
	DefaultPerNode = 4
	// DefaultEarly is the share of an entry's interval by which its
	// renewal may come early, to join the renewal of another due entry.
	DefaultEarly = 0.25
	// minRetry is the shortest wait before a failed renewal is retried.
	minRetry = time.Millisecond
)

// ErrClosed is returned by Add after Close.
var ErrClosed = errors.New("redislock: renewer closed")

// Group is what the entries renewed in one call share: the node that
// serves them and, on Redis Cluster, their hash slot. The owner chooses
// both; the Renewer only compares them, and runs at most PerNode calls at
// once per Node.
type Group struct {
	Node string
	Slot int
}

// Request is one entry's renewal in a call: extend the grant with Token on
// Key to TTL, only while it holds the key. Every Request of one call has
// the same TTL.
type Request struct {
	Key, Token string
	TTL        time.Duration
	// Due is when the renewal was due; it may be sent up to Config.Early of
	// the entry's interval before, to share a call.
	Due time.Time
	// Owner is the entry's Entry.Owner (with callbacks instead: a value
	// of the Renewer's).
	Owner Owner
}

// Result is the outcome of one Request.
type Result struct {
	// Renewed reports that the grant was extended to the request's TTL.
	Renewed bool
	// Err, when Renewed is false, says why: nil or an error matching
	// lease.ErrNotHeld when the grant is gone (the entry is lost), any
	// other error when the outcome is unknown (the renewal is retried).
	Err error
}

// BatchFunc renews reqs, entries of group g, in one call (a script over
// their keys), and returns one Result per Request, in order. An error, or
// a wrong number of results, leaves every outcome unknown: the entries are
// retried. ctx ends when the results could no longer be used (the first
// of the entries' validities is about to end, or the Renewer closes).
type BatchFunc func(ctx context.Context, g Group, reqs []Request) ([]Result, error)

// Config configures a Renewer.
type Config struct {
	// Batch renews one call's entries. Required.
	Batch BatchFunc
	// BatchSize is the most requests per call; default DefaultBatchSize.
	BatchSize int
	// PerNode is the most calls in flight to one Group.Node at a time;
	// default DefaultPerNode.
	PerNode int
	// Early is the share of an entry's interval, in [0, 1), by which its
	// renewal may come early to join another's; default DefaultEarly. A
	// negative value means 0: every entry is renewed when due.
	Early float64
	// Clock is the time source; nil: the real clock.
	Clock lease.Clock

	// Hooks for the package's tests (nil: none): finished is called when a
	// call's outcome has been applied and reported, stopped by Stop once
	// the entry has left the heap and its call (with mu held).
	finished func()
	stopped  func(*Handle)
}

// Renewer renews the entries of one owner. Its methods are safe for
// concurrent use.
type Renewer struct {
	batch     BatchFunc
	batchSize int
	perNode   int
	early     float64
	clock     lease.Clock
	base      time.Time     // the origin of every entry's times
	finished  func()        // Config.finished
	stopped   func(*Handle) // Config.stopped

	ctx    context.Context // of the calls; cancelled by Close
	cancel context.CancelFunc

	mu      sync.Mutex
	cond    sync.Cond // on mu: broadcast when a call or a report ends
	heap    entryHeap
	timer   lease.Timer // due at the head of the heap
	nodes   map[string]*nodeQueue
	groups  map[Group]*Group // every Group an entry had: entries share them
	closed  bool
	running sync.WaitGroup // timer steps and workers; Close waits for them
}

// New returns a Renewer, or an error matching lease.ErrInvalidArgument for
// a bad Config.
func New(cfg Config) (*Renewer, error) {
	switch {
	case cfg.Batch == nil:
		return nil, lease.Invalid("renew: nil BatchFunc")
	case cfg.BatchSize < 0:
		return nil, lease.Invalid("renew: batch size %d", cfg.BatchSize)
	case cfg.PerNode < 0:
		return nil, lease.Invalid("renew: %d calls per node", cfg.PerNode)
	case cfg.Early >= 1:
		return nil, lease.Invalid("renew: early share %v is not below 1", cfg.Early)
	}
	r := &Renewer{batch: cfg.Batch, batchSize: cfg.BatchSize, perNode: cfg.PerNode, early: max(cfg.Early, 0), clock: cfg.Clock,
		finished: cfg.finished, stopped: cfg.stopped, nodes: make(map[string]*nodeQueue), groups: make(map[Group]*Group)}
	if r.batchSize == 0 {
		r.batchSize = DefaultBatchSize
	}
	if r.perNode == 0 {
		r.perNode = DefaultPerNode
	}
	if cfg.Early == 0 {
		r.early = DefaultEarly
	}
	if r.clock == nil {
		r.clock = realClock{}
	}
	r.cond.L = &r.mu
	r.base = r.clock.Now()
	r.ctx, r.cancel = context.WithCancel(context.Background())
	return r, nil
}

type realClock struct{}

func (realClock) Now() time.Time                                  { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) lease.Timer { return time.AfterFunc(d, f) }

// now is the clock's time as an offset from base.
func (r *Renewer) now() time.Duration { return r.clock.Now().Sub(r.base) }

// at is the Time of an offset from base.
func (r *Renewer) at(d time.Duration) time.Time { return r.base.Add(d) }

// Len returns how many entries are being renewed.
func (r *Renewer) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.heap)
}

// Close ends every entry's renewal and waits for the calls in flight
// (cancelled) and the timer to finish. No Renewed or Lost is called after
// Close returns; entries are not told. Later Adds fail with ErrClosed.
func (r *Renewer) Close() { r.shutdown(nil) }

// CloseLost is Close, but tells every entry still renewed that it is lost,
// with cause, before it returns (each entry's Lost, once, in no particular
// order; an entry already stopped or lost is not told again).
func (r *Renewer) CloseLost(cause error) { r.shutdown(cause) }

func (r *Renewer) shutdown(cause error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	if r.timer != nil {
		r.timer.Stop()
	}
	live := r.heap
	for _, e := range live {
		e.idx = -1
		if cause == nil {
			e.stopped = true
		}
	}
	r.heap = nil
	r.mu.Unlock()
	r.cancel()
	r.running.Wait()
	r.mu.Lock()
	var reports []report
	if cause != nil {
		for _, e := range live {
			if !e.stopped && !e.done {
				e.done = true
				reports = append(reports, report{h: e, cause: cause})
			}
		}
	}
	r.report(reports) // and wakes the Stops waiting for a call to return
}

// enter registers a timer step or a worker, unless the Renewer is closed.
// Called with mu held.
func (r *Renewer) enter() bool {
	if r.closed {
		return false
	}
	r.running.Add(1)
	return true
}

// arm sets the timer for the head of the heap. Called with mu held.
func (r *Renewer) arm() {
	if len(r.heap) == 0 || r.closed {
		return
	}
	d := r.heap[0].next - r.now()
	if r.timer == nil {
		r.timer = r.clock.AfterFunc(d, r.step)
		return
	}
	r.timer.Reset(d)
}
