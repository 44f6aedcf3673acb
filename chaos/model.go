package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// redisSlack is Redis's expiry precision (a key set at server time T with PX
// ttl may be gone from T+ttl-1ms) plus a millisecond for the clock read.
const redisSlack = int64(2 * time.Millisecond)

// lockState is the sequential state of one lock key.
type lockState struct {
	Owner  string // "" free; "~" an in-doubt acquire that may hold it; else a token
	Fence  int64  // the highest fence granted so far
	Expiry int64  // earliest moment the owner's lease can have expired on the servers
	Latest int64  // latest moment the owner's lease can still be live
}

// LockModel returns a porcupine model of the lock, partitioned by key.
//
// Inputs are Ops (Acquire, Release, Refresh) carrying their own Call, Return
// and TTL; outputs are Outcomes. All times come from one monotonic clock, so
// the model can reason about expiry:
//   - acquire ok is legal iff the lock is free, in doubt, or its lease may
//     have expired by the return, and the fence is above every earlier one;
//   - acquire fail (ErrNotObtained) is legal iff someone may hold it at the
//     call; with splitVotes (quorum mode, where contenders can split the
//     nodes and all lose) it is always legal;
//   - acquire unknown steps both ways: no effect, or an in-doubt holder that
//     the library's cleanup may remove at any time;
//   - release/refresh ok need the caller's token to be the owner; fail needs
//     another owner or a lease that may have expired; unknown steps both ways.
func LockModel(splitVotes bool) porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			byKey := map[string][]porcupine.Operation{}
			var keys []string
			for _, o := range history {
				k := o.Input.(Op).Key
				if _, ok := byKey[k]; !ok {
					keys = append(keys, k)
				}
				byKey[k] = append(byKey[k], o)
			}
			sort.Strings(keys)
			out := make([][]porcupine.Operation, 0, len(keys))
			for _, k := range keys {
				out = append(out, byKey[k])
			}
			return out
		},
		Init: func() []interface{} { return []interface{}{lockState{}} },
		Step: func(state, input, output interface{}) []interface{} {
			return lockStep(state.(lockState), input.(Op), output.(Outcome), splitVotes)
		},
		DescribeOperation: func(input, output interface{}) string {
			o := input.(Op)
			return fmt.Sprintf("%s %s fence=%d -> %s", o.Kind, short(o.Token), o.Fence, output.(Outcome))
		},
		DescribeState: func(state interface{}) string {
			s := state.(lockState)
			if s.Owner == "" {
				return fmt.Sprintf("free (fence %d)", s.Fence)
			}
			return fmt.Sprintf("%s fence=%d expiry=[%s,%s]", short(s.Owner), s.Fence, ms(s.Expiry), ms(s.Latest))
		},
	}
	return nm.ToModel()
}

func lockStep(s lockState, in Op, out Outcome, splitVotes bool) []interface{} {
	ttl := int64(in.TTL)
	mayBeFree := s.Owner == "" || s.Owner == "~" || in.Return >= s.Expiry
	free := lockState{Fence: s.Fence}
	switch in.Kind {
	case Acquire:
		switch out {
		case OK:
			if mayBeFree && in.Fence > s.Fence {
				return []interface{}{lockState{in.Token, in.Fence, in.Call + ttl - redisSlack, in.Return + ttl}}
			}
		case Fail:
			if splitVotes || (s.Owner != "" && in.Call <= s.Latest) {
				return []interface{}{s}
			}
		case Unknown:
			if mayBeFree {
				return []interface{}{s, lockState{"~", s.Fence, 0, in.Return + ttl}}
			}
			return []interface{}{s}
		}
	case Release:
		mine := s.Owner == in.Token
		switch out {
		case OK:
			if mine && in.Call <= s.Latest {
				return []interface{}{free}
			}
		case Fail:
			if !mine {
				return []interface{}{s}
			}
			if in.Return >= s.Expiry {
				return []interface{}{free}
			}
		case Unknown:
			if mine {
				return []interface{}{s, free}
			}
			return []interface{}{s}
		}
	case Refresh:
		mine := s.Owner == in.Token
		ext := lockState{in.Token, s.Fence, in.Call + ttl - redisSlack, in.Return + ttl}
		switch out {
		case OK:
			if mine && in.Call <= s.Latest {
				return []interface{}{ext}
			}
		case Fail:
			if !mine {
				return []interface{}{s}
			}
			if in.Return >= s.Expiry {
				return []interface{}{free}
			}
		case Unknown:
			if mine {
				return []interface{}{s, ext, free}
			}
			return []interface{}{s}
		}
	default:
		return []interface{}{s} // writes are not lock operations
	}
	return nil
}

// UnknownHorizon bounds how long after its caller gave up an in-doubt
// command can still take effect: it may sit in a stalled server (SIGSTOP,
// DEBUG SLEEP, CLIENT PAUSE) or a slow link until the fault ends. It must
// exceed the longest stall in the suite's nemeses (450 ms; latency toxics
// delay replies, not commands). Bounding it keeps porcupine's search small.
var UnknownHorizon = time.Second

// ToPorcupine turns the lock operations of a history into porcupine
// operations. An operation with an Unknown outcome may take effect after it
// returned, so its return moves UnknownHorizon later (at most to the end of
// the history).
//
// An in-doubt acquire matters to the model only as a possible holder that
// makes a refusal (ErrNotObtained) legal; otherwise it could only excuse
// anomalies, never reveal one, and each one multiplies porcupine's search.
// So it is left out where no refusal can need it: in quorum mode (split
// votes make refusals legal anyway) and on keys with no refused acquire.
func ToPorcupine(ops []Op, splitVotes bool) []porcupine.Operation {
	var end int64
	refused := map[string]bool{}
	for _, o := range ops {
		end = max(end, o.Return)
		if o.Kind == Acquire && o.Outcome == Fail {
			refused[o.Key] = true
		}
	}
	var out []porcupine.Operation
	for _, o := range ops {
		if o.Kind == Write || o.Kind == Acquire && o.Outcome == Unknown && (splitVotes || !refused[o.Key]) {
			continue
		}
		ret := o.Return
		if o.Outcome == Unknown {
			ret = min(end, o.Return+int64(UnknownHorizon)) + 1
		}
		out = append(out, porcupine.Operation{ClientId: o.Worker, Input: o, Call: o.Call, Output: o.Outcome, Return: ret})
	}
	return out
}

// CheckLinearizable runs the porcupine lock model over the history. On an
// illegal history it finds the shortest illegal prefix (by call time), so the
// violation names the operation at which no linearization exists, and, when
// CHAOS_ARTIFACTS names a directory, writes porcupine's HTML visualization
// there.
func CheckLinearizable(name string, ops []Op, splitVotes bool, timeout time.Duration) []Violation {
	model := LockModel(splitVotes)
	hist := ToPorcupine(ops, splitVotes)
	res, info := porcupine.CheckOperationsVerbose(model, hist, timeout)
	switch res {
	case porcupine.Ok:
		return nil
	case porcupine.Unknown:
		return []Violation{{Check: CheckPorcupineTimeout, Msg: fmt.Sprintf("porcupine gave no verdict within %s over %d operations", timeout, len(hist))}}
	}
	if dir := os.Getenv("CHAOS_ARTIFACTS"); dir != "" {
		_ = os.MkdirAll(dir, 0o755)
		_ = porcupine.VisualizePath(model, info, filepath.Join(dir, name+".html"))
	}
	// The diagnosis below re-runs porcupine; bound it so that a failing
	// check stays within the test's time.
	diag := min(timeout, 5*time.Second)
	culprit, ok := findCulprit(model, ops, splitVotes, diag)
	if !ok {
		return []Violation{{Check: CheckPorcupine, Msg: fmt.Sprintf("no linearization of the lock history (%d operations)", len(hist))}}
	}
	involved := []Op{culprit}
	for i := len(ops) - 1; i >= 0 && len(involved) < 4; i-- {
		o := ops[i]
		if o.ID != culprit.ID && o.Key == culprit.Key && o.Kind != Write && o.Return <= culprit.Return &&
			(o.Kind == Acquire && o.Outcome == OK || o.Token == culprit.Token && culprit.Token != "") {
			involved = append(involved, o)
		}
	}
	msg := fmt.Sprintf("no linearization of the lock history on key %q once the result of op #%d (%s %s) is known",
		culprit.Key, culprit.ID, culprit.Kind, culprit.Outcome)
	if why := relaxations(ops, splitVotes, diag); why != "" {
		msg += "; " + why
	}
	return []Violation{{Check: CheckPorcupine, Msg: msg, Ops: involved}}
}

// findCulprit finds the operation whose result first makes the history
// illegal: the history cut at time T keeps every operation called by T, with
// the results of those that returned by T and an unknown outcome for the
// rest; the smallest illegal T is some operation's return.
func findCulprit(model porcupine.Model, ops []Op, splitVotes bool, timeout time.Duration) (Op, bool) {
	var lock []Op
	for _, o := range ops {
		if o.Kind != Write {
			lock = append(lock, o)
		}
	}
	byRet := append([]Op(nil), lock...)
	sort.SliceStable(byRet, func(i, j int) bool { return byRet[i].Return < byRet[j].Return })
	cut := func(t int64) []porcupine.Operation {
		var part []Op
		for _, o := range lock {
			if o.Call > t {
				continue
			}
			if o.Return > t {
				o.Outcome = Unknown
			}
			part = append(part, o)
		}
		return ToPorcupine(part, splitVotes)
	}
	lo, hi := 0, len(byRet)-1 // cut at byRet[hi].Return is illegal (the whole history)
	if porcupine.CheckOperationsTimeout(model, cut(byRet[hi].Return), timeout) != porcupine.Illegal {
		return Op{}, false
	}
	for steps := 0; lo < hi && steps < 24; steps++ { // a binary search: 24 steps cover 16M operations
		mid := (lo + hi) / 2
		if porcupine.CheckOperationsTimeout(model, cut(byRet[mid].Return), timeout) == porcupine.Illegal {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return byRet[hi], true
}

// relaxations says which kind of definite result, if read as in doubt,
// makes the history linearizable: a hint at what went wrong.
func relaxations(ops []Op, splitVotes bool, timeout time.Duration) string {
	model := LockModel(splitVotes)
	for _, r := range []struct {
		kind Kind
		out  Outcome
	}{{Release, Fail}, {Refresh, Fail}, {Acquire, Fail}, {Release, OK}, {Refresh, OK}} {
		relaxed := make([]Op, len(ops))
		n := 0
		for i, o := range ops {
			if o.Kind == r.kind && o.Outcome == r.out {
				o.Outcome = Unknown
				n++
			}
			relaxed[i] = o
		}
		if n == 0 {
			continue
		}
		if porcupine.CheckOperationsTimeout(model, ToPorcupine(relaxed, splitVotes), timeout) == porcupine.Ok {
			return fmt.Sprintf("linearizable if the %d %s results marked %q are read as in doubt", n, r.kind, r.out)
		}
	}
	return ""
}

// CheckAll runs every checker: leases, fences, the porcupine lock model, and,
// when register is not empty, the fenced register.
func CheckAll(name string, ops []Op, splitVotes bool, register, finalValue string, finalFence int64) Report {
	r := Report{Ops: len(ops)}
	r.Violations = append(r.Violations, CheckLeases(ops)...)
	r.Violations = append(r.Violations, CheckFences(ops)...)
	r.Violations = append(r.Violations, CheckLinearizable(name, ops, splitVotes, 20*time.Second)...)
	if register != "" {
		r.Violations = append(r.Violations, CheckRegister(ops, register, finalValue, finalFence)...)
	}
	return r
}
