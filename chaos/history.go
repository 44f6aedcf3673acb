// Package chaos is the reliability suite of redislock: it drives real
// redis-server processes through faults, records every lock and register
// operation with call and return times on one monotonic clock, and checks the
// history against the claims the library makes (see README.md).
//
// The package is its own module so that toxiproxy and porcupine never enter
// the core module's dependency graph.
package chaos

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Kind is the kind of a recorded operation.
type Kind int

// Operation kinds.
const (
	Acquire Kind = iota // Obtain (or the grant half of Run)
	Release             // Release, or a broken raw DEL (Note says so)
	Refresh             // Refresh
	Write               // a fenced (or, in broken variants, unfenced) write to the protected resource
)

func (k Kind) String() string {
	switch k {
	case Acquire:
		return "acquire"
	case Release:
		return "release"
	case Refresh:
		return "refresh"
	case Write:
		return "write"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Outcome is what the caller learned from an operation.
type Outcome int

// Outcomes. Fail is a definite "no": ErrNotObtained, ErrNotHeld or
// ErrStaleFence. Anything else that is not a success is Unknown: the
// operation may or may not have taken effect (a timeout, a reset connection,
// a server error).
const (
	OK Outcome = iota
	Fail
	Unknown
)

func (o Outcome) String() string {
	switch o {
	case OK:
		return "ok"
	case Fail:
		return "fail"
	case Unknown:
		return "unknown"
	}
	return fmt.Sprintf("outcome(%d)", int(o))
}

// Op is one recorded operation. Times are nanoseconds since the history's
// base on the monotonic clock.
type Op struct {
	ID      int
	Worker  int
	Kind    Kind
	Key     string
	Call    int64
	Return  int64
	TTL     time.Duration
	Outcome Outcome

	Token      string // the grant's token (acquire ok; release/refresh/write: the holder's)
	Fence      int64  // the grant's fence (acquire ok; write: the fence written with)
	ValidUntil int64  // acquire/refresh ok: Lock.ValidUntil on the history clock

	Value string // write: the value written
	Read  string // write: the value read before it (read-sleep-write)
	Err   string // the error text, if any
	Note  string // free text, e.g. "raw DEL (broken variant)"
}

func (o Op) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d w%d %-7s [%s, %s]", o.ID, o.Worker, o.Kind, ms(o.Call), ms(o.Return))
	fmt.Fprintf(&b, " %s", o.Outcome)
	if o.Token != "" {
		fmt.Fprintf(&b, " tok=%s", short(o.Token))
	}
	if o.Fence != 0 {
		fmt.Fprintf(&b, " fence=%d", o.Fence)
	}
	if o.ValidUntil != 0 {
		fmt.Fprintf(&b, " validUntil=%s", ms(o.ValidUntil))
	}
	if o.Kind == Write {
		fmt.Fprintf(&b, " read=%q value=%q", o.Read, o.Value)
	}
	if o.Err != "" {
		fmt.Fprintf(&b, " err=%q", o.Err)
	}
	if o.Note != "" {
		fmt.Fprintf(&b, " (%s)", o.Note)
	}
	return b.String()
}

func ms(ns int64) string { return fmt.Sprintf("%.3fms", float64(ns)/1e6) }

func short(tok string) string {
	if len(tok) > 8 {
		return tok[:8]
	}
	return tok
}

// FaultRecord is one injected fault, with its start and end on the history
// clock.
type FaultRecord struct {
	Name       string
	Start, End int64
	Err        string
}

func (f FaultRecord) String() string {
	s := fmt.Sprintf("fault %s [%s, %s]", f.Name, ms(f.Start), ms(f.End))
	if f.Err != "" {
		s += " err=" + f.Err
	}
	return s
}

// History records operations and faults on one monotonic clock. It is safe
// for concurrent use.
//
// The clock is CLOCK_MONOTONIC, which is also what the Go runtime's monotonic
// readings use on Linux, so a re-executed holder process can report times on
// the same clock (MonoNow) and the parent converts them with FromMono.
type History struct {
	base     time.Time
	baseMono int64

	mu     sync.Mutex
	ops    []Op
	faults []FaultRecord
}

// NewHistory starts a history whose clock reads zero now.
func NewHistory() *History {
	return &History{base: time.Now(), baseMono: MonoNow()}
}

// MonoNow reads CLOCK_MONOTONIC in nanoseconds (comparable across processes
// on one machine).
func MonoNow() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// Now is the history clock: nanoseconds since the base.
func (h *History) Now() int64 { return int64(time.Since(h.base)) }

// At converts a time.Time that carries a monotonic reading (as
// Lock.ValidUntil does) to the history clock.
func (h *History) At(t time.Time) int64 { return int64(t.Sub(h.base)) }

// FromMono converts a CLOCK_MONOTONIC reading (from MonoNow, possibly in
// another process) to the history clock.
func (h *History) FromMono(mono int64) int64 { return mono - h.baseMono }

// Add records op, assigns its ID and returns it.
func (h *History) Add(op Op) Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	op.ID = len(h.ops) + 1
	h.ops = append(h.ops, op)
	return op
}

// AddFault records a fault.
func (h *History) AddFault(f FaultRecord) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.faults = append(h.faults, f)
}

// Ops returns a copy of the recorded operations, ordered by call time.
func (h *History) Ops() []Op {
	h.mu.Lock()
	ops := append([]Op(nil), h.ops...)
	h.mu.Unlock()
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Call < ops[j].Call })
	return ops
}

// Faults returns a copy of the recorded faults.
func (h *History) Faults() []FaultRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]FaultRecord(nil), h.faults...)
}

// Slice renders the operations and faults that overlap [from, to], for a
// failure report.
func Slice(ops []Op, faults []FaultRecord, from, to int64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "history slice [%s, %s]:\n", ms(from), ms(to))
	for _, f := range faults {
		if f.End >= from && f.Start <= to {
			fmt.Fprintf(&b, "  %s\n", f)
		}
	}
	n := 0
	for _, o := range ops {
		if o.Return >= from && o.Call <= to {
			if n == 60 {
				b.WriteString("  ... (more operations elided)\n")
				break
			}
			fmt.Fprintf(&b, "  %s\n", o)
			n++
		}
	}
	return b.String()
}
