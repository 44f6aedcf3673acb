package scale

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redisproc"
)

const (
	clusterWorkers  = 64
	clusterDuration = 2 * time.Second
	clusterReps     = 5
	clusterTTL      = 10 * time.Second
)

// BenchmarkClusterVsStandalone runs Obtain+Release with 64 workers on
// distinct keys through a 3-master Redis Cluster (a replica each) and
// through one standalone redis-server, interleaved (standalone, cluster,
// three times), and reports the median pairs/s of each and their ratio
// (target: cluster >= 0.8x standalone; on 2 cores a cluster adds no
// capacity, it must cost little beyond routing).
//
// /default runs the Client's defaults; /no-autopipeline turns
// WithAutoPipeline off; /no-replicas runs the cluster's masters alone (on
// 2 cores the replicas take CPU from the masters).
func BenchmarkClusterVsStandalone(b *testing.B) {
	for _, mode := range []struct {
		name     string
		replicas int
		opts     []redislock.ClientOption
	}{
		{"default", 1, nil},
		{"no-autopipeline", 1, []redislock.ClientOption{redislock.WithAutoPipeline(false)}},
		{"no-replicas", redisproc.NoReplicas, nil},
	} {
		b.Run(mode.name, func(b *testing.B) { benchCluster(b, mode.replicas, mode.opts) })
	}
}

func benchCluster(b *testing.B, replicas int, opts []redislock.ClientOption) {
	ctx := context.Background()
	srv, err := redisproc.Start(redisproc.Config{})
	require.NoError(b, err)
	defer srv.Close()
	cl, err := redisproc.StartCluster(ctx, redisproc.ClusterConfig{Replicas: replicas})
	require.NoError(b, err)
	defer cl.Close()
	standalone := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: clusterWorkers})
	defer standalone.Close()
	cluster := cl.Client(func(o *redis.ClusterOptions) { o.PoolSize = clusterWorkers })
	defer cluster.Close()
	b.ResetTimer()
	var single, multi []float64
	for rep := range clusterReps {
		single = append(single, pairsPerSec(b, standalone, fmt.Sprintf("s%d", rep), opts))
		multi = append(multi, pairsPerSec(b, cluster, fmt.Sprintf("c%d", rep), opts))
	}
	b.StopTimer()
	s, m := median(single), median(multi)
	b.ReportMetric(s, "standalone-pairs/s")
	b.ReportMetric(m, "cluster-pairs/s")
	b.ReportMetric(m/s, "cluster/standalone")
	b.Logf("standalone %v, cluster %v pairs/s", single, multi)
}

// pairsPerSec runs clusterWorkers workers, each on keys of its own, for
// clusterDuration and returns the Obtain+Release pairs per second.
func pairsPerSec(b *testing.B, rdb redis.UniversalClient, run string, opts []redislock.ClientOption) float64 {
	c := redislock.New(rdb, opts...)
	defer c.Close()
	ctx := context.Background()
	var pairs atomic.Int64
	var failed atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range clusterWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				l, err := c.Obtain(ctx, run+"-"+strconv.Itoa(w)+"-"+strconv.Itoa(i%64), clusterTTL)
				if err == nil {
					err = l.Release(ctx)
				}
				if err != nil {
					failed.Store(err)
					return
				}
				pairs.Add(1)
			}
		}()
	}
	start := time.Now()
	time.Sleep(clusterDuration)
	close(stop)
	wg.Wait()
	elapsed := time.Since(start)
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	return float64(pairs.Load()) / elapsed.Seconds()
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
