package sim

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// Grant is one lock grant as its client saw it. Times are the true time
// (the bubble's clock), which every client's validity runs on.
type Grant struct {
	Client     int
	Key        string
	Token      string
	Fence      int64
	Called     time.Time // the Obtain call began
	Returned   time.Time // it returned the grant
	ValidUntil time.Time // the validity the client was given
	// Valid, when set, reads the latest validity the client was given
	// (moved by renewals); it overrides ValidUntil while the grant is held.
	Valid  func() time.Time
	Ended  time.Time // the client stopped holding it (zero: holds it)
	EndWhy string    // released, lost (reported), ...
}

// until is the latest validity the client was given.
func (g *Grant) until() time.Time {
	if g.Valid != nil && g.Ended.IsZero() {
		if v := g.Valid(); v.After(g.ValidUntil) {
			g.ValidUntil = v
		}
	}
	return g.ValidUntil
}

// End is when the grant stops counting as held: its end, or its validity,
// whichever is first.
func (g *Grant) End() time.Time {
	if u := g.until(); g.Ended.IsZero() || !g.Ended.Before(u) {
		return u
	}
	return g.Ended
}

// live reports whether the client holds g at now, within its validity.
func (g *Grant) live(now time.Time) bool {
	return (g.Ended.IsZero() || now.Before(g.Ended)) && now.Before(g.until())
}

// Event is one line of a history: a call, its outcome, a fault.
type Event struct {
	At     time.Time
	Client int // -1: the network or a node
	What   string
}

// Violation is an invariant found broken.
type Violation struct {
	Invariant string // one of the Inv constants
	At        time.Time
	Detail    string
}

func (v Violation) String() string { return v.Invariant + ": " + v.Detail }

// History is what the clients saw, in order, with the invariants' checks
// (check.go). Safe for concurrent use.
type History struct {
	mu         sync.Mutex
	start      time.Time
	grants     []*Grant
	events     []Event
	violations []Violation
	steps      int // checks of the nodes' state (Probe)
}

// NewHistory starts a history at start (true time).
func NewHistory(start time.Time) *History { return &History{start: start} }

// Log adds an event at now.
func (h *History) Log(client int, format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, Event{At: time.Now(), Client: client, What: fmt.Sprintf(format, args...)})
}

// Violations returns the violations found so far.
func (h *History) Violations() []Violation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Violation(nil), h.violations...)
}

// Broke reports whether invariant inv was found broken.
func (h *History) Broke(inv string) bool {
	_, ok := h.Found(inv)
	return ok
}

// Found returns when invariant inv was first found broken, from the
// history's start.
func (h *History) Found(inv string) (time.Duration, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, v := range h.violations {
		if v.Invariant == inv {
			return v.At.Sub(h.start), true
		}
	}
	return 0, false
}

// Steps returns how often the nodes' state was checked (Probe).
func (h *History) Steps() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.steps
}

// Grants returns the number of grants.
func (h *History) Grants() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.grants)
}

// Events returns the number of events.
func (h *History) Events() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.events)
}

func (h *History) violate(inv string, at time.Time, format string, args ...any) {
	h.violations = append(h.violations, Violation{Invariant: inv, At: at, Detail: fmt.Sprintf(format, args...)})
	h.events = append(h.events, Event{At: at, Client: -1, What: "VIOLATION " + inv + ": " + fmt.Sprintf(format, args...)})
}

// String prints the history: one event a line, times from its start.
func (h *History) String() string { return h.until(nil) }

// Until prints the history up to the first violation of inv (all of it
// when inv was not broken).
func (h *History) Until(inv string) string {
	at, ok := h.Found(inv)
	if !ok {
		return h.String()
	}
	end := h.start.Add(at)
	return h.until(&end)
}

func (h *History) until(end *time.Time) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	ev := append([]Event(nil), h.events...)
	sort.SliceStable(ev, func(i, j int) bool { return ev[i].At.Before(ev[j].At) })
	var b strings.Builder
	for _, e := range ev {
		if end != nil && e.At.After(*end) {
			break
		}
		who := "net "
		if e.Client >= 0 {
			who = fmt.Sprintf("c%d  ", e.Client)
		}
		fmt.Fprintf(&b, "%10.3fms %s %s\n", float64(e.At.Sub(h.start))/float64(time.Millisecond), who, e.What)
	}
	return b.String()
}

// Digest is a summary of the history that two runs of one seed share
// when they replay alike: its grants (client, fence, when returned and
// ended, all from the start; fences come from clocks, which start at the
// run's start) and its violations.
func (h *History) Digest() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var b strings.Builder
	for _, g := range h.grants {
		fmt.Fprintf(&b, "%d:%d:%d:%d;", g.Client, g.Fence-h.start.UnixMicro(), g.Returned.Sub(h.start), g.End().Sub(h.start))
	}
	for _, v := range h.violations {
		fmt.Fprintf(&b, "%s@%d;", v.Invariant, v.At.Sub(h.start))
	}
	fmt.Fprintf(&b, "events %d steps %d", len(h.events), h.steps)
	return b.String()
}
