package monitoring_test

import (
	"context"
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/redislock-go/redislock/extra/redislockprom"
	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/observe"
)

// metric is one exported series name and the labels its series carry.
type metric struct {
	family string // the metric family (a histogram's name without _bucket, ...)
	labels map[string]bool
}

// targetLabels are the labels Prometheus adds to every scraped series.
var targetLabels = []string{"job", "instance"}

// exported returns the series names a default Collector exports, with their
// labels: a counter's or gauge's name, a histogram's _bucket (with le),
// _sum and _count. It feeds the Collector one event of each kind and fails
// if a metric the Collector describes has no series then, so that a metric
// added without an event here is noticed.
func exported(t *testing.T) map[string]metric {
	t.Helper()
	col, err := redislockprom.New()
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(col)
	feed(col)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]metric{}
	for _, mf := range mfs {
		labels := map[string]bool{}
		for _, l := range targetLabels {
			labels[l] = true
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = true
			}
		}
		name := mf.GetName()
		if mf.GetType() != dto.MetricType_HISTOGRAM {
			out[name] = metric{name, labels}
			continue
		}
		out[name+"_sum"] = metric{name, labels}
		out[name+"_count"] = metric{name, labels}
		bucket := map[string]bool{"le": true}
		for l := range labels {
			bucket[l] = true
		}
		out[name+"_bucket"] = metric{name, bucket}
	}
	described := make(chan *prometheus.Desc)
	go func() { col.Describe(described); close(described) }()
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range described {
		m := fqName.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read the name of %v", d)
		}
		if !gathered(mfs, m[1]) {
			t.Errorf("metric %s has no series after feed: give feed an event that makes one", m[1])
		}
	}
	return out
}

func gathered(mfs []*dto.MetricFamily, name string) bool {
	for _, mf := range mfs {
		if mf.GetName() == name {
			return true
		}
	}
	return false
}

// feed sends col one event of each kind, as a Client would.
func feed(col *redislockprom.Collector) {
	ctx := context.Background()
	const key, ttl = "k", time.Minute
	octx := col.ObtainStart(ctx, observe.ObtainStartEvent{Key: key, TTL: ttl})
	col.WaitStart(octx, observe.WaitEvent{Key: key, Waiters: 1})
	col.ObtainDone(octx, observe.ObtainDoneEvent{Key: key, TTL: ttl, Fence: 1, Attempts: 2, Wait: time.Millisecond})
	rctx := col.RefreshStart(ctx, observe.RefreshStartEvent{Key: key, Fence: 1, TTL: ttl, Renewal: true})
	col.RefreshDone(rctx, observe.RefreshDoneEvent{Key: key, Fence: 1, TTL: ttl, Renewal: true})
	lctx := col.ReleaseStart(ctx, observe.ReleaseStartEvent{Key: key, Fence: 1})
	col.ReleaseDone(lctx, observe.ReleaseDoneEvent{Key: key, Fence: 1, Held: time.Second})
	octx = col.ObtainStart(ctx, observe.ObtainStartEvent{Key: key, TTL: ttl})
	col.ObtainDone(octx, observe.ObtainDoneEvent{Key: key, TTL: ttl, Fence: 2, Attempts: 1})
	col.LockLost(ctx, observe.LossEvent{Key: key, Fence: 2, Cause: lease.ErrNotHeld}) // an expiration
	col.StaleFence(ctx, observe.StaleFenceEvent{Key: key, Fence: 3, Newest: 4})
	col.NodeFailed(ctx, observe.NodeEvent{Node: 0, Op: "obtain", Err: errors.New("down")})
	col.Resubscribed(observe.SubscriptionEvent{Err: errors.New("down")})
	col.CleanupFailed(ctx, observe.CleanupEvent{Key: key, Err: errors.New("down")})

	// The pattern packages'.
	actx := col.AcquireStart(ctx, observe.AcquireStartEvent{Semaphore: "s", TTL: ttl})
	col.Queued(actx, observe.QueueEvent{Semaphore: "s"})
	col.AcquireDone(actx, observe.AcquireDoneEvent{Semaphore: "s", TTL: ttl, Fence: 1, Wait: time.Millisecond})
	col.PermitRefreshed(ctx, observe.PermitEvent{Semaphore: "s", Fence: 1, TTL: ttl})
	col.PermitReleased(ctx, observe.PermitEvent{Semaphore: "s", Fence: 1, Held: time.Second})
	col.TermStarted(ctx, observe.TermEvent{Election: "e", Identity: "me", Term: 1})
	col.TermEnded(ctx, observe.TermEvent{Election: "e", Identity: "me", Term: 1, Held: time.Minute, Cause: errors.New("resigned")})
	col.JobDone(ctx, observe.JobEvent{ID: "j", Outcome: observe.JobRan, Fence: 1, Duration: time.Second})
	col.CacheDone(ctx, observe.CacheEvent{Key: key, Result: observe.CacheFilled, Wait: time.Millisecond})
	fctx := col.FillStart(ctx, observe.FillStartEvent{Key: key})
	col.FillDone(fctx, observe.FillDoneEvent{Key: key, Duration: time.Millisecond})
}
