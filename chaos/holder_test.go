package chaos

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/proctest"
)

// holderRole makes the re-executed test binary act as a lock holder; its
// spec is "lockAddr|registerAddr|key|register|ttlMillis".
const holderRole = "chaos-holder"

// TestHolderProcess is the holder side of TestClaimPausedHolder: it runs only
// as a child process. It obtains the lock, reports the grant with times on
// CLOCK_MONOTONIC (shared with the parent), then on each command line from
// the parent ("WRITE", "RELEASE") does that step and reports it.
func TestHolderProcess(t *testing.T) {
	spec, ok := proctest.Child(holderRole)
	if !ok {
		t.Skip("only runs as a child process of TestClaimPausedHolder")
	}
	f := strings.Split(spec, "|")
	ttlMs, _ := strconv.Atoi(f[4])
	lockRDB := redis.NewClient(ClientOptions(f[0]))
	regRDB := redis.NewClient(ClientOptions(f[1]))
	defer lockRDB.Close()
	defer regRDB.Close()
	c := redislock.New(lockRDB)
	defer c.Close()
	ctx := context.Background()
	call := MonoNow()
	l, err := c.Obtain(ctx, f[2], time.Duration(ttlMs)*time.Millisecond)
	ret := MonoNow()
	if err != nil {
		proctest.Emit("GRANT %d %d err %q", call, ret, err.Error())
		return
	}
	vu := MonoNow() + int64(time.Until(l.ValidUntil()))
	proctest.Emit("GRANT %d %d ok %s %d %d", call, ret, l.Token(), l.Fence(), vu)
	for cmd := range proctest.Commands() {
		var err error
		call := MonoNow()
		switch cmd {
		case "WRITE":
			err = RedisRegister{RDB: regRDB, Key: f[3]}.Set(ctx, "1|holder", l.Fence())
		case "RELEASE":
			err = l.Release(ctx)
		default:
			return
		}
		msg := "ok"
		if err != nil {
			msg = err.Error()
		}
		proctest.Emit("%s %d %d %q", cmd, call, MonoNow(), msg)
	}
}

// holderProc is the parent's handle on a holder process.
type holderProc struct{ *proctest.Proc }

func startHolder(t *testing.T, spec string) holderProc {
	return holderProc{proctest.Start(t, "TestHolderProcess", holderRole, spec)}
}

func (p holderProc) next(t *testing.T) []string {
	t.Helper()
	return strings.Fields(p.Next(t))
}

func (p holderProc) step(t *testing.T, h *History, cmd string, kind Kind, op Op) Op {
	t.Helper()
	p.Send(t, cmd)
	f := p.next(t)
	call, _ := strconv.ParseInt(f[1], 10, 64)
	ret, _ := strconv.ParseInt(f[2], 10, 64)
	msg, _ := strconv.Unquote(strings.Join(f[3:], " "))
	op.Kind, op.Call, op.Return = kind, h.FromMono(call), h.FromMono(ret)
	switch {
	case msg == "ok":
		op.Outcome = OK
	case strings.Contains(msg, redislock.ErrStaleFence.Error()) || strings.Contains(msg, redislock.ErrNotHeld.Error()):
		op.Outcome, op.Err = Fail, msg
	default:
		op.Outcome, op.Err = Unknown, msg
	}
	return h.Add(op)
}

// A lock holder (a separate process) is SIGSTOPped past its lease, another
// client takes the lock, then the holder resumes and carries on. Claim: the
// second grant comes only after the first ValidUntil, with a larger fence;
// the resumed holder's fenced write is rejected, its Release answers
// ErrNotHeld and leaves the new holder's key untouched.
func TestClaimPausedHolder(t *testing.T) {
	needRedis(t)
	n := startNodes(t, 1)[0]
	reg := resource(t, "reg:paused-holder")
	key := "paused-holder"
	lease := 500 * time.Millisecond
	h := NewHistory()
	p := startHolder(t, fmt.Sprintf("%s|%s|%s|%s|%d", n.proxy.Addr(), reg.RDB.Options().Addr, key, reg.Key, lease.Milliseconds()))
	g := p.next(t)
	require.GreaterOrEqual(t, len(g), 7, "holder did not obtain: %v", g)
	require.Equal(t, "ok", g[3], "holder did not obtain: %v", g)
	call, _ := strconv.ParseInt(g[1], 10, 64)
	ret, _ := strconv.ParseInt(g[2], 10, 64)
	fence, _ := strconv.ParseInt(g[5], 10, 64)
	vu, _ := strconv.ParseInt(g[6], 10, 64)
	a := h.Add(Op{Worker: 1, Kind: Acquire, Key: key, Call: h.FromMono(call), Return: h.FromMono(ret), TTL: lease,
		Outcome: OK, Token: g[4], Fence: fence, ValidUntil: h.FromMono(vu)})

	fstart := h.Now()
	p.Signal(t, syscall.SIGSTOP)
	c := singleClient(t, n)
	b := obtainRetry(t, h, c, 2, key, lease)
	if b == nil {
		t.Fatal("the lock never became free while its holder was stopped")
	}
	if got := h.At(b.ValidUntil()); got < a.ValidUntil {
		t.Errorf("second grant valid until %s, before the first's %s", ms(got), ms(a.ValidUntil))
	}
	writeRec(t, h, reg, 2, b, "1|second")
	p.Signal(t, syscall.SIGCONT)
	h.AddFault(FaultRecord{Name: "sigstop holder process", Start: fstart, End: h.Now()})
	summary.faults.Add(1)

	w := p.step(t, h, "WRITE", Write, Op{Worker: 1, Key: reg.Key, Token: a.Token, Fence: a.Fence, Value: "1|holder"})
	assert.False(t, w.Outcome != Fail || !strings.Contains(w.Err, "stale"), "resumed holder's write: %s, want ErrStaleFence", w)
	r := p.step(t, h, "RELEASE", Release, Op{Worker: 1, Key: key, Token: a.Token})
	assert.False(t, r.Outcome != Fail || !strings.Contains(r.Err, "not held"), "resumed holder's release: %s, want ErrNotHeld", r)
	v, err := n.srv.Do("GET", lockKey(key))
	if s, _ := v.(string); err != nil || lockValue(s).Token != b.Token() {
		t.Errorf("the new holder's key was touched: %v %v", v, err)
	}
	assert.NoError(t, releaseRec(t, h, 2, b), "new holder's release")
	rep := check(t, h, false, reg)
	expectClean(t, "a holder paused past its lease is fenced off and cannot touch the new holder's lock", rep, h.Ops(), h.Faults())
}

func obtainRetry(t *testing.T, h *History, c *redislock.Client, worker int, key string, ttl time.Duration) *redislock.Lock {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*ttl+2*time.Second)
	defer cancel()
	call := h.Now()
	l, err := c.Obtain(ctx, key, ttl, redislock.WithRetry(redislock.LinearBackoff(10*time.Millisecond)))
	op := Op{Worker: worker, Kind: Acquire, Key: key, Call: call, Return: h.Now(), TTL: ttl, Outcome: Classify(err), Err: errText(err)}
	if err == nil {
		op.Token, op.Fence, op.ValidUntil = l.Token(), l.Fence(), h.At(l.ValidUntil())
	} else if !errors.Is(err, redislock.ErrNotObtained) {
		t.Logf("obtain: %v", err)
	}
	h.Add(op)
	return l
}
