package lockbench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/redislock-go/redislock/internal/redisproc"
)

// TargetInfo describes what was measured against.
type TargetInfo struct {
	Kind         string   `json:"kind"` // "spawn", "addr", "quorum", "miniredis"
	Real         bool     `json:"real"`
	RedisVersion string   `json:"redis_version,omitempty"`
	Nodes        []string `json:"nodes"`
	PoolSize     int      `json:"pool_size"`
	// ContextTimeout: the libraries' go-redis clients had
	// ContextTimeoutEnabled (Config.ContextTimeout); false in reports
	// from before the flag, whose clients did not.
	ContextTimeout bool `json:"context_timeout"`
	// BatchOptions: the clients had BatchOptions (Config.BatchOptions);
	// false in reports from before the flag, whose clients did not.
	BatchOptions bool   `json:"batch_options"`
	Label        string `json:"label"`
}

// target holds the clients the libraries share and the admin clients the
// runner uses for INFO; it owns spawned servers and miniredis instances.
type target struct {
	info    TargetInfo
	clients []*redis.Client // handed to the libraries, counted by hooks
	admin   []*redis.Client // for INFO and FLUSHALL, not counted
	sent    atomic.Int64    // commands the libraries sent (client side)
	pg      *pgTarget       // --backend postgres (postgres.go)
	procs   []*redisproc.Server
	minis   []*miniredis.Miniredis
}

// countHook counts commands sent by the libraries: one per command, and one
// per command inside a pipeline.
type countHook struct{ n *atomic.Int64 }

func (h countHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}
func (h countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

func openTarget(ctx context.Context, cfg *Config, needNodes int) (*target, error) {
	if cfg.Backend == BackendPostgres {
		return openPostgres(ctx, cfg)
	}
	t := &target{}
	var addrs []string
	switch {
	case cfg.Addr != "" || len(cfg.Quorum) > 0:
		if cfg.Addr != "" {
			addrs = append(addrs, cfg.Addr)
			t.info.Kind = "addr"
		}
		if len(cfg.Quorum) > 0 {
			if cfg.Addr == "" {
				t.info.Kind = "quorum"
			}
			addrs = append(addrs, cfg.Quorum...)
		}
		t.info.Real = true
	case cfg.Spawn > 0 || (!cfg.Miniredis && haveRedisServer()):
		n := cfg.Spawn
		if n == 0 {
			n = needNodes
		}
		procs, err := spawnRedis(n)
		if err != nil {
			return nil, err
		}
		t.procs = procs
		for _, p := range procs {
			addrs = append(addrs, p.Addr())
		}
		t.info.Kind, t.info.Real = "spawn", true
	default:
		for range needNodes {
			m, err := miniredis.Run()
			if err != nil {
				t.close()
				return nil, err
			}
			t.minis = append(t.minis, m)
			addrs = append(addrs, m.Addr())
		}
		t.info.Kind = "miniredis"
	}
	t.info.Nodes = addrs
	t.info.PoolSize = cfg.PoolSize
	t.info.ContextTimeout = cfg.ContextTimeout
	t.info.BatchOptions = cfg.BatchOptions
	for _, a := range addrs {
		c := redis.NewClient(cfg.libOptions(a))
		c.AddHook(countHook{&t.sent})
		t.clients = append(t.clients, c)
		t.admin = append(t.admin, redis.NewClient(&redis.Options{Addr: a, PoolSize: 2}))
	}
	if t.info.PoolSize == 0 && len(t.clients) > 0 {
		t.info.PoolSize = t.clients[0].Options().PoolSize
	}
	for _, a := range t.admin {
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := a.Ping(pctx).Err()
		cancel()
		if err != nil {
			t.close()
			return nil, fmt.Errorf("lockbench: %s: %w", a.Options().Addr, err)
		}
	}
	if t.info.Real {
		if s, err := t.admin[0].Info(ctx, "server").Result(); err == nil {
			t.info.RedisVersion = infoField(s, "redis_version")
		}
		t.info.Label = fmt.Sprintf("redis-server %s (%s, %d node(s))", t.info.RedisVersion, t.info.Kind, len(addrs))
	} else {
		t.info.Label = "embedded miniredis — NOT a real measurement (no redis-server found; use --spawn, --addr or --quorum)"
	}
	return t, nil
}

// libOptions are the go-redis options of a client handed to the
// libraries: the run's pool size, ContextTimeoutEnabled and BatchOptions as
// configured, go-redis' defaults otherwise (ReadTimeout 3 s).
func (cfg *Config) libOptions(addr string) *redis.Options {
	o := &redis.Options{Addr: addr, PoolSize: cfg.PoolSize, ContextTimeoutEnabled: cfg.ContextTimeout}
	if cfg.BatchOptions {
		o.AutoPipelineOptions = BatchOptions()
	}
	return o
}

// BatchOptions are the AutoPipelineOptions redislock's README recommends
// for a client with many concurrent callers: 2 batches in flight (so that
// the client and Redis work at once instead of taking turns), not kept in
// submit order, each gathered for at most 20 µs.
func BatchOptions() *redis.AutoPipelineOptions {
	return &redis.AutoPipelineOptions{MaxConcurrentBatches: 2, Unordered: true, MaxFlushDelay: 20 * time.Microsecond}
}

// batchNote describes BatchOptions in reports and the flag's help.
func batchNote() string {
	o := BatchOptions()
	return fmt.Sprintf("%d batches in flight, unordered, %v flush delay", o.MaxConcurrentBatches, o.MaxFlushDelay)
}

// clientNote describes the libraries' go-redis clients in a report's
// header: "" for a target that is not Redis.
func clientNote(t TargetInfo) string {
	if t.Kind == BackendPostgres {
		return ""
	}
	note := ", ContextTimeoutEnabled off"
	if t.ContextTimeout {
		note = ", ContextTimeoutEnabled"
	}
	if t.BatchOptions {
		note += ", AutoPipelineOptions: " + batchNote()
	}
	return note
}

func haveRedisServer() bool {
	_, err := lookRedisServer()
	return err == nil
}

func (t *target) close() {
	for _, c := range t.clients {
		_ = c.Close()
	}
	for _, c := range t.admin {
		_ = c.Close()
	}
	if t.pg != nil {
		t.pg.close()
		t.pg = nil
	}
	stopRedis(t.procs)
	t.procs = nil
	for _, m := range t.minis {
		m.Close()
	}
	t.minis = nil
}

// nodes returns the first n clients as the interface the libraries take.
func (t *target) nodes(n int) []redis.UniversalClient {
	out := make([]redis.UniversalClient, n)
	for i := range out {
		out[i] = t.clients[i]
	}
	return out
}

// serverStats is what the first nodes of a run did, from INFO: commands
// (commandstats), per command, and CPU.
type serverStats struct {
	calls int64              // every command, those inside scripts too; -1: unknown
	cpu   float64            // the servers' CPU time in µs (user + system); -1: unknown
	cmds  map[string]cmdStat // per command (commandstats)
}

// cmdStat is one command's INFO commandstats: calls and µs spent in them.
type cmdStat struct{ calls, usec int64 }

// runnerCommands are the commands of the runner itself, left out.
var runnerCommands = map[string]bool{"info": true, "flushall": true, "ping": true, "hello": true,
	"client|setinfo": true, "client|setname": true}

// serverStats sums INFO commandstats and cpu over the first n nodes,
// leaving out the runner's own INFO/FLUSHALL/PING. Commands run inside
// scripts are included (Redis counts them, and counts their time in the
// script's too), so calls is the server-side work per op. calls and cpu
// are -1 where the server does not report them (miniredis, PostgreSQL).
func (t *target) serverStats(ctx context.Context, n int) serverStats {
	out := serverStats{calls: -1, cpu: -1}
	if n > len(t.admin) {
		return out // not Redis (--backend postgres)
	}
	cmds := map[string]cmdStat{}
	var calls int64
	var cpu float64
	for _, a := range t.admin[:n] {
		s, err := a.Info(ctx, "commandstats", "cpu").Result()
		if err != nil || !strings.Contains(s, "cmdstat_") {
			return out
		}
		for _, line := range strings.Split(s, "\n") {
			line = strings.TrimSpace(line)
			name, rest, ok := strings.Cut(line, ":")
			switch {
			case !ok:
				continue
			case name == "used_cpu_sys" || name == "used_cpu_user":
				v, _ := strconv.ParseFloat(rest, 64)
				cpu += v * 1e6
				continue
			case !strings.HasPrefix(name, "cmdstat_"):
				continue
			}
			cmd := strings.TrimPrefix(name, "cmdstat_")
			if runnerCommands[cmd] {
				continue
			}
			fields := strings.ReplaceAll(rest, ",", "\n")
			c, _ := strconv.ParseInt(infoField(fields, "calls"), 10, 64)
			u, _ := strconv.ParseInt(infoField(fields, "usec"), 10, 64)
			st := cmds[cmd]
			st.calls += c
			st.usec += u
			cmds[cmd] = st
			calls += c
		}
	}
	out.calls, out.cmds = calls, cmds
	if cpu > 0 {
		out.cpu = cpu
	}
	return out
}

// keysLeft counts the keys matching pattern on the first n nodes, and of
// them the keys without expiry; -1, 0 when the nodes cannot be scanned.
func (t *target) keysLeft(ctx context.Context, n int, pattern string) (left, noTTL int64) {
	if n > len(t.admin) {
		return -1, 0
	}
	for _, a := range t.admin[:n] {
		iter := a.Scan(ctx, 0, pattern, 1000).Iterator()
		var batch []string
		check := func() {
			pipe := a.Pipeline()
			cmds := make([]*redis.DurationCmd, len(batch))
			for i, k := range batch {
				cmds[i] = pipe.PTTL(ctx, k)
			}
			_, _ = pipe.Exec(ctx)
			for _, c := range cmds {
				if c.Val() == -1 { // PTTL -1 ms: no expiry
					noTTL++
				}
			}
			batch = batch[:0]
		}
		for iter.Next(ctx) {
			left++
			if batch = append(batch, iter.Val()); len(batch) == 1000 {
				check()
			}
		}
		if iter.Err() != nil {
			return -1, 0
		}
		check()
	}
	return left, noTTL
}

func infoField(s, key string) string {
	for _, line := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), key+"="); ok {
			return v
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), key+":"); ok {
			return v
		}
	}
	return ""
}
