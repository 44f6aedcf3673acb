package sim

import (
	"strconv"
	"time"
)

// The invariants the simulation checks, on every step and on the history.
const (
	// InvValidReturn: no grant is returned after its validity.
	InvValidReturn = "grant returned after its validity"
	// InvExclusion: never two holders of a key valid at once.
	InvExclusion = "two valid holders"
	// InvFenceOrder: fences strictly increase per key in the order the
	// grants were returned. (Two grants of a key returned in one order
	// were made on their common node in that order, unless one of them
	// was returned after its validity or both were valid at once.)
	InvFenceOrder = "fence not increasing"
	// InvLossReported: a grant is held (on a majority of the nodes) for as
	// long as its client believes it valid, or its loss was reported
	// first.
	InvLossReported = "lock lost, not reported before its validity ended"
	// InvExpiry: no key without expiry on any node.
	InvExpiry = "key without expiry"
)

// Granted records a grant the moment Obtain returned it, and checks it
// against every grant before: its validity has not passed, no other holder
// of the key is valid, its fence is above every fence returned before.
func (h *History) Granted(g *Grant) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := g.Returned
	h.events = append(h.events, Event{At: now, Client: g.Client,
		What: "granted " + g.Key + " fence " + itoa(g.Fence) + " valid " + ms(g.ValidUntil.Sub(now))})
	if !now.Before(g.ValidUntil) {
		h.violate(InvValidReturn, now, "c%d fence %d returned %v after its validity", g.Client, g.Fence, now.Sub(g.ValidUntil))
	}
	for _, o := range h.grants {
		if o.Key != g.Key {
			continue
		}
		if o.live(now) {
			h.violate(InvExclusion, now, "c%d granted fence %d while c%d holds fence %d, valid %v more", g.Client, g.Fence, o.Client, o.Fence, o.until().Sub(now))
		}
		if o.Fence >= g.Fence {
			h.violate(InvFenceOrder, now, "c%d fence %d not above c%d's %d, granted before", g.Client, g.Fence, o.Client, o.Fence)
		}
	}
	h.grants = append(h.grants, g)
}

// Refreshed moves g's validity to until (a refresh that returned OK).
func (h *History) Refreshed(g *Grant, until time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	g.ValidUntil = until
	h.events = append(h.events, Event{At: time.Now(), Client: g.Client, What: "refreshed fence " + itoa(g.Fence) + " valid " + ms(time.Until(until))})
}

// Ended records that g's client stopped holding it at now, and why.
func (h *History) Ended(g *Grant, why string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if g.Ended.IsZero() {
		g.until()
		g.Ended, g.EndWhy = time.Now(), why
		h.events = append(h.events, Event{At: g.Ended, Client: g.Client, What: why + " fence " + itoa(g.Fence)})
	}
}

// Probe checks the nodes' state at now: holds(g) reports whether g is held
// on a majority of the nodes; bare lists keys found without expiry. A
// grant its client believes valid must be held.
func (h *History) Probe(now time.Time, holds func(*Grant) bool, bare []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.steps++
	for _, g := range h.grants {
		if g.live(now) && !holds(g) {
			h.violate(InvLossReported, now, "c%d fence %d not held by a majority, valid %v more", g.Client, g.Fence, g.until().Sub(now))
			g.until()
			g.Ended, g.EndWhy = now, "found lost" // report it once
		}
	}
	for _, k := range bare {
		h.violate(InvExpiry, now, "%s", k)
	}
}

// Final checks the whole history once the run ended: no two grants of a
// key overlap, fences ordered (the step checks, over every pair again).
func (h *History) Final() {
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := map[string]bool{}
	for _, v := range h.violations {
		seen[v.Invariant] = true
	}
	for i, a := range h.grants {
		for _, b := range h.grants[i+1:] {
			if a.Key != b.Key {
				continue
			}
			if !seen[InvExclusion] && a.Returned.Before(b.End()) && b.Returned.Before(a.End()) {
				h.violate(InvExclusion, b.Returned, "c%d fence %d and c%d fence %d overlap", a.Client, a.Fence, b.Client, b.Fence)
				seen[InvExclusion] = true
			}
			if !seen[InvFenceOrder] && a.Fence >= b.Fence { // a was returned first
				h.violate(InvFenceOrder, b.Returned, "c%d fence %d and c%d fence %d out of order", a.Client, a.Fence, b.Client, b.Fence)
				seen[InvFenceOrder] = true
			}
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func ms(d time.Duration) string { return d.Round(time.Microsecond).String() }
