package redislockprom_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/extra/redislockprom"
)

func Example() {
	m := miniredis.NewMiniRedis() // any Redis; an embedded one keeps the example self-contained
	if err := m.Start(); err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()

	col, err := redislockprom.New()
	if err != nil {
		log.Fatal(err)
	}
	reg := prometheus.NewRegistry() // or prometheus.DefaultRegisterer, served by promhttp.Handler()
	reg.MustRegister(col)

	locker := redislock.New(rdb, redislock.WithObserver(col))
	defer locker.Close()

	ctx := context.Background()
	lock, err := locker.Obtain(ctx, "report", 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	show(reg, "redislock_held_locks")
	_ = lock.Release(ctx)
	show(reg, "redislock_held_locks", "redislock_acquisitions_total", "redislock_releases_total")
	// Output:
	// redislock_held_locks 1
	// redislock_held_locks 0
	// redislock_acquisitions_total{outcome="obtained"} 1
	// redislock_releases_total{result="ok"} 1
}

// show prints the series of the named counters and gauges that are not 0
// (a gauge: even when 0).
func show(g prometheus.Gatherer, names ...string) {
	mfs, err := g.Gather()
	if err != nil {
		log.Fatal(err)
	}
	for _, name := range names {
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, m := range mf.GetMetric() {
				labels := ""
				for _, l := range m.GetLabel() {
					if labels != "" {
						labels += ","
					}
					labels += fmt.Sprintf("%s=%q", l.GetName(), l.GetValue())
				}
				if labels != "" {
					labels = "{" + labels + "}"
				}
				switch {
				case m.Gauge != nil:
					fmt.Printf("%s%s %g\n", name, labels, m.Gauge.GetValue())
				case m.Counter != nil && m.Counter.GetValue() != 0:
					fmt.Printf("%s%s %g\n", name, labels, m.Counter.GetValue())
				}
			}
		}
	}
}
