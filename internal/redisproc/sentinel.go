package redisproc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Sentinel defaults.
const (
	DefaultSentinels       = 3
	DefaultMasterName      = "redisproc"
	DefaultDownAfter       = 5 * time.Second
	DefaultFailoverTimeout = 10 * time.Second
)

// sentinelDebug are the SENTINEL DEBUG timings every sentinel runs with:
// instances are polled every 100 ms instead of every 1 to 10 s, so that
// discovery and the reconfiguration after a failover take a fraction of a
// second; TILT (entered when the sentinel's timer runs more than 2 s late,
// as on a loaded machine, and which stops failovers for 30 s) is made
// practically unreachable. The hello period stays at 1 s: a sentinel turns
// a replica that reports itself a master back into a replica after 4
// hello periods, and the failover leader polls the replica it promotes
// only once a second, so a shorter period undoes every failover.
var sentinelDebug = []any{
	"info-period", 100, "ping-period", 100, "ask-period", 100, "publish-period", 1000,
	"tilt-trigger", 60000, "tilt-period", 1000, "min-link-reconnect-period", 100,
}

// SentinelConfig describes a Sentinel deployment on loopback.
type SentinelConfig struct {
	// Replicas is the number of replicas of the primary; default 1.
	Replicas int
	// Sentinels is the number of sentinels; default DefaultSentinels.
	Sentinels int
	// Quorum is the sentinels' quorum; default a majority of them.
	Quorum int
	// MasterName is the name the sentinels monitor the primary under;
	// default DefaultMasterName.
	MasterName string
	// DownAfter is down-after-milliseconds, FailoverTimeout
	// failover-timeout; defaults DefaultDownAfter, DefaultFailoverTimeout.
	DownAfter, FailoverTimeout time.Duration
	// Bin is redis-server; "" looks it up on PATH.
	Bin string
	// Args are extra command-line config for the primary and replicas.
	Args []string
}

// Sentinel is a primary with replicas and the sentinels that monitor it.
// Which data server is the primary changes with failovers: ask Primary.
type Sentinel struct {
	cfg       SentinelConfig
	data      []*Server // the first one started as the primary
	sentinels []*Server
}

// StartSentinel starts the primary, its replicas and the sentinels, and
// waits until WaitHealthy holds. On error the started servers are closed.
func StartSentinel(ctx context.Context, cfg SentinelConfig) (*Sentinel, error) {
	if cfg.Replicas == 0 {
		cfg.Replicas = 1
	}
	if cfg.Sentinels == 0 {
		cfg.Sentinels = DefaultSentinels
	}
	if cfg.Quorum == 0 {
		cfg.Quorum = cfg.Sentinels/2 + 1
	}
	if cfg.MasterName == "" {
		cfg.MasterName = DefaultMasterName
	}
	if cfg.DownAfter == 0 {
		cfg.DownAfter = DefaultDownAfter
	}
	if cfg.FailoverTimeout == 0 {
		cfg.FailoverTimeout = DefaultFailoverTimeout
	}
	if cfg.Replicas < 0 || cfg.Sentinels < 1 || cfg.Quorum < 1 || cfg.Quorum > cfg.Sentinels || cfg.DownAfter < 0 || cfg.FailoverTimeout < 0 {
		return nil, fmt.Errorf("redisproc: invalid sentinel deployment: %+v", cfg)
	}
	s := &Sentinel{cfg: cfg}
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()
	primary, err := Start(Config{Bin: cfg.Bin, LogLevel: clusterLogLevel, Args: cfg.Args})
	if err != nil {
		return nil, err
	}
	s.data = append(s.data, primary)
	for range cfg.Replicas {
		args := append([]string{"--replicaof", "127.0.0.1", strconv.Itoa(primary.Port())}, cfg.Args...)
		r, err := Start(Config{Bin: cfg.Bin, LogLevel: clusterLogLevel, Args: args})
		if err != nil {
			return nil, err
		}
		s.data = append(s.data, r)
	}
	conf := fmt.Sprintf("sentinel resolve-hostnames no\n"+
		"sentinel monitor %[1]s 127.0.0.1 %[2]d %[3]d\n"+
		"sentinel down-after-milliseconds %[1]s %[4]d\n"+
		"sentinel failover-timeout %[1]s %[5]d\n"+
		"sentinel parallel-syncs %[1]s 1\n",
		cfg.MasterName, primary.Port(), cfg.Quorum, cfg.DownAfter.Milliseconds(), cfg.FailoverTimeout.Milliseconds())
	for range cfg.Sentinels {
		sn, err := Start(Config{Bin: cfg.Bin, Sentinel: true, File: conf, LogLevel: clusterLogLevel})
		if err != nil {
			return nil, err
		}
		s.sentinels = append(s.sentinels, sn)
		if _, err := do(ctx, sn, append([]any{"SENTINEL", "DEBUG"}, sentinelDebug...)...); err != nil {
			return nil, fmt.Errorf("redisproc: SENTINEL DEBUG on %s: %w", sn.Addr(), err)
		}
	}
	if err := s.WaitHealthy(ctx); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

// MasterName is the name the sentinels monitor the primary under.
func (s *Sentinel) MasterName() string { return s.cfg.MasterName }

// Servers returns the data servers (the primary and its replicas), the
// first-started primary first.
func (s *Sentinel) Servers() []*Server { return slices.Clone(s.data) }

// Sentinels returns the sentinel processes.
func (s *Sentinel) Sentinels() []*Server { return slices.Clone(s.sentinels) }

// SentinelAddrs returns the sentinels' addresses.
func (s *Sentinel) SentinelAddrs() []string {
	var addrs []string
	for _, sn := range s.sentinels {
		addrs = append(addrs, sn.Addr())
	}
	return addrs
}

// Client returns a Sentinel-backed failover client of the primary
// (redis.NewFailoverClient), with one-second dial, read and write timeouts
// unless fn (may be nil) changes the options. The caller closes it.
func (s *Sentinel) Client(fn func(*redis.FailoverOptions)) *redis.Client {
	o := &redis.FailoverOptions{MasterName: s.cfg.MasterName, SentinelAddrs: s.SentinelAddrs(),
		DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second}
	if fn != nil {
		fn(o)
	}
	return redis.NewFailoverClient(o)
}

// Close kills every server and removes their directories.
func (s *Sentinel) Close() {
	for _, sn := range s.sentinels {
		sn.Close()
	}
	for _, d := range s.data {
		d.Close()
	}
}

func (s *Sentinel) all() []*Server { return append(slices.Clone(s.data), s.sentinels...) }

func (s *Sentinel) byPort(port string) *Server {
	for _, d := range s.data {
		if strconv.Itoa(d.Port()) == port {
			return d
		}
	}
	return nil
}

// Primary returns the data server that every running sentinel names as the
// primary (an error if they disagree).
func (s *Sentinel) Primary(ctx context.Context) (*Server, error) {
	var port string
	for _, sn := range s.sentinels {
		if !sn.Running() {
			continue
		}
		v, err := do(ctx, sn, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", s.cfg.MasterName)
		if err != nil {
			return nil, fmt.Errorf("redisproc: sentinel %s: %w", sn.Addr(), err)
		}
		addr, _ := v.([]any)
		if len(addr) != 2 {
			return nil, fmt.Errorf("redisproc: sentinel %s: primary address %v", sn.Addr(), v)
		}
		p := fmt.Sprint(addr[1])
		if port != "" && p != port {
			return nil, fmt.Errorf("redisproc: the sentinels disagree on the primary (port %s and %s)", port, p)
		}
		port = p
	}
	if d := s.byPort(port); d != nil {
		return d, nil
	}
	return nil, fmt.Errorf("redisproc: the sentinels name an unknown primary (port %q)", port)
}

// WaitHealthy waits until every running sentinel names the same primary,
// which is a master; every other running data server replicates it and is
// in sync with it; and every sentinel sees the primary without failure or
// failover flags, the running replicas as connected replicas of it, and
// every other sentinel.
func (s *Sentinel) WaitHealthy(ctx context.Context) error {
	err := poll(ctx, "sentinel deployment healthy", func(ctx context.Context) (bool, string) {
		p, err := s.Primary(ctx)
		if err != nil {
			return false, err.Error()
		}
		return s.healthy(ctx, p)
	})
	if err != nil {
		return fmt.Errorf("%w%s", err, logs(s.all()))
	}
	return nil
}

func (s *Sentinel) healthy(ctx context.Context, p *Server) (bool, string) {
	if !p.Running() {
		return false, "the primary " + p.Addr() + " is not running"
	}
	info, err := doString(ctx, p, "INFO", "replication")
	if err != nil {
		return false, err.Error()
	}
	if infoField(info, "role") != "master" {
		return false, p.Addr() + " is not a master yet"
	}
	var replicas []*Server
	for _, d := range s.data {
		if d != p && d.Running() {
			replicas = append(replicas, d)
			if why := inSync(ctx, d, p); why != "" {
				return false, why
			}
		}
	}
	for _, sn := range s.sentinels {
		if !sn.Running() {
			continue
		}
		m, err := s.fields(ctx, sn, "SENTINEL", "MASTER", s.cfg.MasterName)
		if err != nil {
			return false, err.Error()
		}
		if len(m) == 0 {
			return false, sn.Addr() + ": no master entry"
		}
		if m[0]["flags"] != "master" {
			return false, fmt.Sprintf("%s: primary flags %s", sn.Addr(), m[0]["flags"])
		}
		if m[0]["num-other-sentinels"] != strconv.Itoa(len(s.sentinels)-1) {
			return false, fmt.Sprintf("%s knows %s other sentinels", sn.Addr(), m[0]["num-other-sentinels"])
		}
		rs, err := s.fields(ctx, sn, "SENTINEL", "REPLICAS", s.cfg.MasterName)
		if err != nil {
			return false, err.Error()
		}
		for _, r := range replicas {
			i := slices.IndexFunc(rs, func(e map[string]string) bool { return e["port"] == strconv.Itoa(r.Port()) })
			switch {
			case i < 0:
				return false, fmt.Sprintf("%s does not know the replica %s", sn.Addr(), r.Addr())
			case rs[i]["flags"] != "slave" || rs[i]["master-link-status"] != "ok" || rs[i]["master-port"] != strconv.Itoa(p.Port()):
				return false, fmt.Sprintf("%s sees the replica %s with flags %s, link %s, master port %s", sn.Addr(), r.Addr(), rs[i]["flags"], rs[i]["master-link-status"], rs[i]["master-port"])
			}
		}
	}
	return true, ""
}

// fields runs a SENTINEL command whose reply is a list of field maps
// (SENTINEL REPLICAS) or one field map (SENTINEL MASTER), in RESP2 (flat
// lists) or RESP3 (maps).
func (s *Sentinel) fields(ctx context.Context, sn *Server, args ...any) ([]map[string]string, error) {
	v, err := do(ctx, sn, args...)
	if err != nil {
		return nil, fmt.Errorf("redisproc: %v on %s: %w", args[:2], sn.Addr(), err)
	}
	if m, ok := asFields(v); ok {
		return []map[string]string{m}, nil
	}
	list, _ := v.([]any)
	var out []map[string]string
	for _, e := range list {
		m, ok := asFields(e)
		if !ok {
			return nil, fmt.Errorf("redisproc: %v on %s: reply %T", args[:2], sn.Addr(), e)
		}
		out = append(out, m)
	}
	return out, nil
}

func asFields(v any) (map[string]string, bool) {
	out := map[string]string{}
	switch v := v.(type) {
	case map[any]any:
		for k, x := range v {
			out[fmt.Sprint(k)] = fmt.Sprint(x)
		}
		return out, true
	case []any:
		if len(v) == 0 || len(v)%2 != 0 {
			return nil, false
		}
		for i := 0; i < len(v); i += 2 {
			k, ok := v[i].(string)
			if !ok {
				return nil, false
			}
			out[k] = fmt.Sprint(v[i+1])
		}
		return out, true
	}
	return nil, false
}

// Failover makes the sentinels promote a replica (SENTINEL FAILOVER, which
// needs no agreement and does not wait for the replica to catch up) and
// waits until every running sentinel names it as the primary and the
// deployment is healthy again around it: the old primary, if it runs, is
// then a replica in sync with the new one. It returns the new primary.
func (s *Sentinel) Failover(ctx context.Context) (*Server, error) {
	old, err := s.Primary(ctx)
	if err != nil {
		return nil, err
	}
	var sn *Server
	for _, x := range s.sentinels {
		if x.Running() {
			sn = x
			break
		}
	}
	if sn == nil {
		return nil, errors.New("redisproc: no sentinel is running")
	}
	// A replica that was paused or disconnected is not a candidate until
	// the sentinel has fresh replies from it (-NOGOODSLAVE meanwhile).
	start := func(ctx context.Context) (bool, string, error) {
		_, ferr := do(ctx, sn, "SENTINEL", "FAILOVER", s.cfg.MasterName)
		if ferr != nil && strings.HasPrefix(ferr.Error(), "NOGOODSLAVE") {
			return false, ferr.Error(), nil
		}
		return true, "", ferr
	}
	var ferr error
	err = poll(ctx, "SENTINEL FAILOVER accepted", func(ctx context.Context) (ok bool, why string) {
		ok, why, ferr = start(ctx)
		return ok, why
	})
	if err == nil {
		err = ferr
	}
	if err != nil {
		return nil, fmt.Errorf("redisproc: SENTINEL FAILOVER on %s: %w", sn.Addr(), err)
	}
	var p *Server
	tries := 1
	err = poll(ctx, "sentinel failover from "+old.Addr(), func(ctx context.Context) (bool, string) {
		if p, err = s.Primary(ctx); err != nil {
			return false, err.Error()
		}
		if p == old {
			// A failover the sentinel aborted (on a loaded machine: the
			// replica it chose missed a reply or two, and it gave up)
			// is not tried again by the sentinel: start another.
			if m, err := s.fields(ctx, sn, "SENTINEL", "MASTER", s.cfg.MasterName); err == nil && len(m) == 1 &&
				!strings.Contains(m[0]["flags"], "failover_in_progress") {
				if ok, _, err := start(ctx); ok && err == nil {
					tries++
				}
			}
			return false, fmt.Sprintf("the sentinels still name %s (failover started %d times)", old.Addr(), tries)
		}
		return s.healthy(ctx, p)
	})
	if err != nil {
		return nil, fmt.Errorf("%w%s", err, logs(s.all()))
	}
	return p, nil
}
