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

// ToPorcupine turns the lock operations of a history into porcupine
// operations. An operation with an Unknown outcome may take effect at any
// later time (a command queued on a paused server runs when it resumes), so
// its return moves to the end of the history.
func ToPorcupine(ops []Op) []porcupine.Operation {
	var end int64
	for _, o := range ops {
		end = max(end, o.Return)
	}
	var out []porcupine.Operation
	for _, o := range ops {
		if o.Kind == Write {
			continue
		}
		ret := o.Return
		if o.Outcome == Unknown {
			ret = end + 1
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
	hist := ToPorcupine(ops)
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
	// Shortest illegal prefix: the last operation called is the culprit.
	lock := make([]Op, 0, len(ops))
	for _, o := range ops {
		if o.Kind != Write {
			lock = append(lock, o)
		}
	}
	sort.SliceStable(lock, func(i, j int) bool { return lock[i].Call < lock[j].Call })
	lo, hi := 1, len(lock) // lock[:hi] is illegal
	for lo < hi {
		mid := (lo + hi) / 2
		if porcupine.CheckOperationsTimeout(model, ToPorcupine(lock[:mid]), timeout) == porcupine.Illegal {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	culprit := lock[hi-1]
	involved := []Op{culprit}
	for i := hi - 2; i >= 0 && len(involved) < 4; i-- {
		if lock[i].Key == culprit.Key && (lock[i].Kind == Acquire && lock[i].Outcome == OK || lock[i].Token == culprit.Token) {
			involved = append(involved, lock[i])
		}
	}
	return []Violation{{Check: CheckPorcupine,
		Msg: fmt.Sprintf("no linearization of the lock history on key %q once op #%d is included", culprit.Key, culprit.ID),
		Ops: involved}}
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
