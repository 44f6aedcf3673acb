package chaos

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Checks, by the name a Violation carries.
const (
	CheckLeaseOverlap     = "lease-overlap"        // two tokens' [grant return, lease end] windows overlap
	CheckGrantAfterExpiry = "grant-after-expiry"   // a grant returned after its own ValidUntil
	CheckFenceOrder       = "fence-order"          // A returned before B was called, yet fence(A) >= fence(B)
	CheckFenceUnique      = "fence-unique"         // two tokens got the same fence
	CheckStaleWrite       = "stale-write-accepted" // the register took a fence lower than one it had already acknowledged
	CheckWrongReject      = "write-wrongly-rejected"
	CheckWriteLost        = "accepted-write-lost" // the register's final state lost the highest acknowledged write
	CheckLostUpdate       = "lost-update"         // two acknowledged read-modify-writes read the same value (mutual exclusion failed)
	CheckPorcupine        = "porcupine-lock-model"
	CheckPorcupineTimeout = "porcupine-timeout"
)

// Violation is one failed check with the operations that show it.
type Violation struct {
	Check string
	Msg   string
	Ops   []Op
}

func (v Violation) String() string { return v.Check + ": " + v.Msg }

// Report is the outcome of all checks over one history.
type Report struct {
	Ops        int // operations checked
	Violations []Violation
}

// Has reports whether some violation is of the named check.
func (r Report) Has(check string) bool { return r.Count(check) > 0 }

// Count counts the violations of the named check.
func (r Report) Count(check string) int {
	n := 0
	for _, v := range r.Violations {
		if v.Check == check {
			n++
		}
	}
	return n
}

// Checks lists the distinct checks that failed.
func (r Report) Checks() []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range r.Violations {
		if !seen[v.Check] {
			seen[v.Check] = true
			out = append(out, v.Check)
		}
	}
	sort.Strings(out)
	return out
}

// Explain renders each violation (at most max) with the slice of history
// around the operations involved.
func (r Report) Explain(ops []Op, faults []FaultRecord, max int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d violation(s) over %d operations: %v\n", len(r.Violations), r.Ops, r.Checks())
	for i, v := range r.Violations {
		if i == max {
			fmt.Fprintf(&b, "... %d more\n", len(r.Violations)-max)
			break
		}
		fmt.Fprintf(&b, "\n[%d] %s\n", i+1, v)
		if len(v.Ops) == 0 {
			continue
		}
		from, to := v.Ops[0].Call, v.Ops[0].Return
		for _, o := range v.Ops {
			fmt.Fprintf(&b, "  involved: %s\n", o)
			from = min(from, o.Call)
			to = max64(to, o.Return, o.ValidUntil)
		}
		b.WriteString(Slice(ops, faults, from-int64(5*time.Millisecond), to+int64(5*time.Millisecond)))
	}
	return b.String()
}

func max64(a int64, bs ...int64) int64 {
	for _, b := range bs {
		if b > a {
			a = b
		}
	}
	return a
}

// stampSlack is how late a return stamp may be, on a loaded 2-core machine,
// after the library's last look at the clock.
const stampSlack = int64(10 * time.Millisecond)

const maxPerCheck = 20 // violations kept per check, so a broken run stays readable

// lease is one grant's window: from the grant's return to the end of the
// lease as the library confirmed it (ValidUntil, moved on by successful
// refreshes) or, earlier, the moment the holder called Release.
type lease struct {
	grant      Op
	start, end int64
	releasedBy *Op
}

func leases(ops []Op) map[string][]lease {
	type ext struct {
		validUntil int64
		release    *Op
	}
	exts := map[string]*ext{}
	for _, o := range ops {
		if o.Kind == Acquire && o.Outcome == OK {
			exts[o.Key+"\x00"+o.Token] = &ext{validUntil: o.ValidUntil}
		}
	}
	for i := range ops {
		o := &ops[i]
		e := exts[o.Key+"\x00"+o.Token]
		if e == nil {
			continue
		}
		switch {
		case o.Kind == Refresh && o.Outcome == OK:
			e.validUntil = max(e.validUntil, o.ValidUntil)
		case o.Kind == Release:
			if e.release == nil || o.Call < e.release.Call {
				e.release = o
			}
		}
	}
	out := map[string][]lease{}
	for _, o := range ops {
		if o.Kind != Acquire || o.Outcome != OK {
			continue
		}
		e := exts[o.Key+"\x00"+o.Token]
		l := lease{grant: o, start: o.Return, end: e.validUntil, releasedBy: e.release}
		if e.release != nil && e.release.Call < l.end {
			l.end = e.release.Call
		}
		out[o.Key] = append(out[o.Key], l)
	}
	return out
}

// CheckLeases checks that, per key, the lease windows of different tokens
// never overlap, and that no grant returned after its own validity.
func CheckLeases(ops []Op) []Violation {
	var out []Violation
	nOverlap := 0
	for _, ls := range leases(ops) {
		sort.Slice(ls, func(i, j int) bool { return ls[i].start < ls[j].start })
		var cur *lease // the window with the latest end so far
		for i := range ls {
			l := &ls[i]
			// The return is stamped after Obtain returned: allow for the
			// scheduler delay between the library's own check and the stamp.
			if l.grant.Return > l.grant.ValidUntil+stampSlack {
				out = append(out, Violation{CheckGrantAfterExpiry,
					fmt.Sprintf("grant returned at %s, after its ValidUntil %s", ms(l.grant.Return), ms(l.grant.ValidUntil)),
					[]Op{l.grant}})
			}
			if l.end <= l.start {
				continue // released (or expired) before it was used: an empty window
			}
			if cur != nil && l.start < cur.end && l.grant.Token != cur.grant.Token && nOverlap < maxPerCheck {
				nOverlap++
				v := Violation{CheckLeaseOverlap,
					fmt.Sprintf("token %s (fence %d) held [%s, %s] while token %s (fence %d) held [%s, %s]",
						short(cur.grant.Token), cur.grant.Fence, ms(cur.start), ms(cur.end),
						short(l.grant.Token), l.grant.Fence, ms(l.start), ms(l.end)),
					[]Op{cur.grant, l.grant}}
				if cur.releasedBy != nil {
					v.Ops = append(v.Ops, *cur.releasedBy)
				}
				out = append(out, v)
			}
			if cur == nil || l.end > cur.end {
				cur = l
			}
		}
	}
	return out
}

// CheckFences checks, per key, that a grant that returned before another
// was called has the smaller fence, and that no two tokens share a fence.
func CheckFences(ops []Op) []Violation {
	var out []Violation
	byKey := map[string][]Op{}
	for _, o := range ops {
		if o.Kind == Acquire && o.Outcome == OK {
			byKey[o.Key] = append(byKey[o.Key], o)
		}
	}
	for _, gs := range byKey {
		owner := map[int64]Op{}
		for _, g := range gs {
			if prev, ok := owner[g.Fence]; ok && prev.Token != g.Token {
				out = append(out, Violation{CheckFenceUnique,
					fmt.Sprintf("fence %d granted to two tokens", g.Fence), []Op{prev, g}})
			} else {
				owner[g.Fence] = g
			}
		}
		byRet := append([]Op(nil), gs...)
		sort.Slice(byRet, func(i, j int) bool { return byRet[i].Return < byRet[j].Return })
		byCall := append([]Op(nil), gs...)
		sort.Slice(byCall, func(i, j int) bool { return byCall[i].Call < byCall[j].Call })
		var best *Op // highest fence among grants returned so far
		j, n := 0, 0
		for _, b := range byCall {
			for j < len(byRet) && byRet[j].Return < b.Call {
				if best == nil || byRet[j].Fence > best.Fence {
					best = &byRet[j]
				}
				j++
			}
			if best != nil && best.Token != b.Token && best.Fence >= b.Fence && n < maxPerCheck {
				n++
				out = append(out, Violation{CheckFenceOrder,
					fmt.Sprintf("grant with fence %d returned at %s, before a grant called at %s got fence %d",
						best.Fence, ms(best.Return), ms(b.Call), b.Fence),
					[]Op{*best, b}})
			}
		}
	}
	return out
}

// Counter parses the read-sleep-write counter out of a register value
// ("n|writer"); the empty value is 0.
func Counter(v string) (int64, bool) {
	if v == "" {
		return 0, true
	}
	n, err := strconv.ParseInt(strings.SplitN(v, "|", 2)[0], 10, 64)
	return n, err == nil
}

// CheckRegister checks the writes to one fenced register (key) and its final
// state (value, fence read after the run):
//   - no stale write accepted: once a write with fence g was acknowledged, a
//     write called later with a fence below g is never acknowledged;
//   - no write wrongly rejected: a rejection needs a higher fence that could
//     have reached the register first;
//   - no acknowledged write lost: the final fence is at least the highest
//     acknowledged one, and the final value was written by someone;
//   - no lost update: two acknowledged read-modify-writes never read the
//     same counter (this one is mutual exclusion, which fencing alone does not
//     give: see the claims table).
func CheckRegister(ops []Op, key, finalValue string, finalFence int64) []Violation {
	var out []Violation
	var ws []Op
	for _, o := range ops {
		if o.Kind == Write && o.Key == key {
			ws = append(ws, o)
		}
	}
	var acked []Op
	for _, w := range ws {
		if w.Outcome == OK {
			acked = append(acked, w)
		}
	}
	// stale write accepted
	byRet := append([]Op(nil), acked...)
	sort.Slice(byRet, func(i, j int) bool { return byRet[i].Return < byRet[j].Return })
	byCall := append([]Op(nil), acked...)
	sort.Slice(byCall, func(i, j int) bool { return byCall[i].Call < byCall[j].Call })
	var best *Op
	j, n := 0, 0
	for _, w := range byCall {
		for j < len(byRet) && byRet[j].Return < w.Call {
			if best == nil || byRet[j].Fence > best.Fence {
				best = &byRet[j]
			}
			j++
		}
		if best != nil && w.Fence < best.Fence && n < maxPerCheck {
			n++
			out = append(out, Violation{CheckStaleWrite,
				fmt.Sprintf("write with fence %d acknowledged although fence %d was acknowledged at %s, before it was called",
					w.Fence, best.Fence, ms(best.Return)),
				[]Op{*best, w}})
		}
	}
	// wrongly rejected
	n = 0
	for _, w := range ws {
		if w.Outcome != Fail {
			continue
		}
		justified := false
		for _, x := range ws {
			if x.Outcome != Fail && x.Fence > w.Fence && x.Call < w.Return {
				justified = true
				break
			}
		}
		if !justified && n < maxPerCheck {
			n++
			out = append(out, Violation{CheckWrongReject,
				fmt.Sprintf("write with fence %d rejected as stale, but no higher fence was written before it returned", w.Fence),
				[]Op{w}})
		}
	}
	// acknowledged write lost
	var top *Op
	for i := range acked {
		if top == nil || acked[i].Fence > top.Fence {
			top = &acked[i]
		}
	}
	if top != nil && finalFence < top.Fence {
		out = append(out, Violation{CheckWriteLost,
			fmt.Sprintf("final register fence %d (value %q) is below the acknowledged fence %d", finalFence, finalValue, top.Fence),
			[]Op{*top}})
	}
	if finalValue != "" {
		found := false
		for _, w := range ws {
			if w.Value == finalValue && w.Fence == finalFence && w.Outcome != Fail {
				found = true
				break
			}
		}
		if !found {
			out = append(out, Violation{CheckWriteLost,
				fmt.Sprintf("final register state (%q, fence %d) was never written by an acknowledged or in-doubt write", finalValue, finalFence), nil})
		}
	}
	// lost update
	seen := map[int64]Op{}
	n = 0
	for _, w := range byCall {
		c, ok := Counter(w.Value)
		if !ok {
			continue
		}
		if prev, dup := seen[c]; dup && n < maxPerCheck {
			n++
			out = append(out, Violation{CheckLostUpdate,
				fmt.Sprintf("two acknowledged writes both read %q and wrote counter %d", w.Read, c),
				[]Op{prev, w}})
			continue
		}
		seen[c] = w
	}
	return out
}
