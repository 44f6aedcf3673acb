package lockbench

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Scenario names.
const (
	Uncontended = "uncontended"
	Hotkey      = "hotkey"
	Quorum      = "quorum"
	Renew       = "renew"
)

// Config selects scenarios, target and output. The zero value is not useful;
// start from DefaultConfig.
type Config struct {
	Scenarios   []string      `json:"scenarios"`
	Workers     []int         `json:"workers"`      // uncontended
	FreshKeys   bool          `json:"fresh_keys"`   // uncontended: a new key per pair (else one key per worker)
	HotWorkers  []int         `json:"hot_workers"`  // hotkey
	QuorumSizes []int         `json:"quorum_sizes"` // quorum
	Hold        time.Duration `json:"hold"`         // hotkey: time a grant is held
	Think       time.Duration `json:"think"`        // hotkey: pause after a release
	Duration    time.Duration `json:"duration"`     // measured window per run
	Warmup      time.Duration `json:"warmup"`       // unmeasured lead-in per run
	Reps        int           `json:"reps"`
	TTL         time.Duration `json:"ttl"`
	WaitTimeout time.Duration `json:"wait_timeout"` // hotkey: ctx of one Obtain
	// StopGrace bounds a cell's end: workers still in a library call this
	// long after the window's end are cancelled, and the ones that have
	// not returned this long after that are left behind (the cell is
	// reported STALLED).
	StopGrace  time.Duration `json:"stop_grace"`
	RenewLocks int           `json:"renew_locks"`
	RenewTTL   time.Duration `json:"renew_ttl"`
	PoolSize   int           `json:"pool_size"` // go-redis PoolSize; 0 = go-redis default
	// ContextTimeout sets ContextTimeoutEnabled on the go-redis clients
	// handed to the libraries (every library alike), as the README
	// recommends: go-redis then applies a call's context deadline to its
	// socket. The default is true.
	ContextTimeout bool `json:"context_timeout"`
	// BatchOptions gives the go-redis clients handed to the libraries the
	// AutoPipelineOptions redislock's README recommends for many
	// concurrent callers (BatchOptions). Of the libraries only redislock
	// uses go-redis' AutoPipeliner, so only its batched calls change. The
	// default is true.
	BatchOptions bool `json:"batch_options"`
	// Pin runs the cells of one worker with GOMAXPROCS 1, the tool and the
	// spawned redis-servers on CPU 0 (Linux), so that client and server
	// share one CPU as they take turns.
	Pin bool `json:"pin,omitempty"`
	// stampede (stampede.go)
	StampedeCallers int           `json:"stampede_callers"`
	StampedeProcs   int           `json:"stampede_procs"`
	StampedeFill    time.Duration `json:"stampede_fill"`
	Libs            []string      `json:"libs,omitempty"`
	Backend         string        `json:"backend,omitempty"` // "" or redis, postgres (postgres.go)
	DSN             string        `json:"-"`

	Addr      string   `json:"-"`
	Quorum    []string `json:"-"`
	Spawn     int      `json:"-"`
	Miniredis bool     `json:"-"`

	Progress bool `json:"-"`
}

// DefaultConfig is what `go run ./bench` does without flags.
func DefaultConfig() Config {
	return Config{
		Scenarios:      []string{Uncontended, Hotkey, Quorum, Renew, Stampede, Blackhole},
		Workers:        []int{1, 16, 64, 256},
		HotWorkers:     []int{8, 32},
		QuorumSizes:    []int{3, 5},
		Duration:       2 * time.Second,
		Warmup:         300 * time.Millisecond,
		Reps:           3,
		TTL:            10 * time.Second,
		ContextTimeout: true,
		BatchOptions:   true,
		WaitTimeout:    2 * time.Second,
		StopGrace:      10 * time.Second,
		RenewLocks:     1000,
		RenewTTL:       3 * time.Second,

		StampedeCallers: 100,
		StampedeProcs:   3,
		StampedeFill:    50 * time.Millisecond,
	}
}

// Validate reports a bad configuration.
func (c *Config) Validate() error {
	var errs []error
	for _, s := range c.Scenarios {
		switch s {
		case Uncontended, Hotkey, Quorum, Renew, Stampede, Blackhole:
		default:
			errs = append(errs, fmt.Errorf("unknown scenario %q", s))
		}
	}
	if c.Duration <= 0 || c.Reps < 1 || c.TTL < time.Millisecond || c.RenewTTL < 30*time.Millisecond || c.WaitTimeout <= 0 || c.StopGrace <= 0 {
		errs = append(errs, errors.New("duration, reps, ttl, renew-ttl, wait-timeout and stop-grace must be positive (renew-ttl >= 30ms)"))
	}
	if c.Spawn < 0 || c.RenewLocks < 0 || c.PoolSize < 0 || c.Hold < 0 || c.Think < 0 || c.Warmup < 0 {
		errs = append(errs, errors.New("negative values are not allowed"))
	}
	if c.StampedeCallers < 1 || c.StampedeProcs < 1 || c.StampedeFill < 0 {
		errs = append(errs, errors.New("stampede-callers and stampede-procs must be >= 1, stampede-fill >= 0"))
	}
	if c.Spawn > 0 && (c.Addr != "" || len(c.Quorum) > 0) {
		errs = append(errs, errors.New("--spawn excludes --addr/--quorum"))
	}
	if c.Pin && (!pinCanWork || c.Addr != "" || len(c.Quorum) > 0 || c.Miniredis || c.Backend == BackendPostgres) {
		errs = append(errs, errors.New("--pin needs Linux and redis-servers the tool spawns"))
	}
	for _, l := range [][]int{c.Workers, c.HotWorkers, c.QuorumSizes} {
		for _, n := range l {
			if n < 1 {
				errs = append(errs, errors.New("worker and node counts must be >= 1"))
			}
		}
	}
	if err := c.validateBackend(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// needNodes is how many nodes the selected scenarios use.
func (c *Config) needNodes() int {
	n := 1
	if c.has(Quorum) {
		for _, q := range c.QuorumSizes {
			n = max(n, q)
		}
	}
	if c.has(Blackhole) {
		n = max(n, blackholeNodes)
	}
	return n
}

func (c *Config) has(s string) bool {
	for _, x := range c.Scenarios {
		if x == s {
			return true
		}
	}
	return false
}

// Flags are the command-line flags bound to a Config; Output says where
// results go.
type Output struct {
	JSON    bool
	JSONOut string
	HTML    string
	SVG     string
	MD      string
	// FromJSON re-renders a saved report instead of measuring.
	FromJSON string
	// Strict makes Main fail when a cell has no samples, no progress,
	// errors, or lost locks (for CI smoke runs).
	Strict bool
	// CPUProfile and MemProfile, if set, receive pprof profiles of the run.
	CPUProfile string
	MemProfile string
}

// BindFlags registers the tool's flags on fs, writing into c and o.
func BindFlags(fs *flag.FlagSet, c *Config, o *Output) {
	fs.Func("scenarios", "comma-separated: uncontended,hotkey,quorum,quorum-blackhole,renew,stampede (default all)", func(s string) error {
		c.Scenarios = splitList(s)
		return nil
	})
	intList(fs, "workers", "uncontended: worker counts", &c.Workers)
	fs.BoolVar(&c.FreshKeys, "fresh-keys", c.FreshKeys, "uncontended: a new key for every pair (as per-job deduplication does)")
	fs.BoolFunc("same-key", "uncontended: each worker reuses its own key (the default)", func(string) error {
		c.FreshKeys = false
		return nil
	})
	intList(fs, "hot-workers", "hotkey: worker counts contending on one key", &c.HotWorkers)
	intList(fs, "quorum-sizes", "quorum: node counts", &c.QuorumSizes)
	fs.DurationVar(&c.Hold, "hold", c.Hold, "hotkey: how long each grant is held before release")
	fs.DurationVar(&c.Think, "think", c.Think, "hotkey: pause after a release before wanting the lock again")
	fs.DurationVar(&c.Duration, "duration", c.Duration, "measured time per run")
	fs.DurationVar(&c.Warmup, "warmup", c.Warmup, "unmeasured warm-up per run")
	fs.IntVar(&c.Reps, "reps", c.Reps, "repetitions; libraries are interleaved within each repetition, results are medians with min-max")
	fs.DurationVar(&c.TTL, "ttl", c.TTL, "lock TTL for uncontended, hotkey and quorum")
	fs.DurationVar(&c.WaitTimeout, "wait-timeout", c.WaitTimeout, "hotkey: ctx timeout of one Obtain (the worker then tries again)")
	fs.DurationVar(&c.StopGrace, "stop-grace", c.StopGrace, "how long workers may take to return after a window ends before they are cancelled, and after that before the cell is reported STALLED")
	fs.IntVar(&c.RenewLocks, "renew-locks", c.RenewLocks, "renew: locks held at once with auto-renewal")
	fs.DurationVar(&c.RenewTTL, "renew-ttl", c.RenewTTL, "renew: lock TTL (renewed every TTL/3)")
	fs.IntVar(&c.StampedeCallers, "stampede-callers", c.StampedeCallers, "stampede: concurrent requests per cold key")
	fs.IntVar(&c.StampedeProcs, "stampede-procs", c.StampedeProcs, "stampede: Groups (processes, each with its own Client) the requests are spread over")
	fs.DurationVar(&c.StampedeFill, "stampede-fill", c.StampedeFill, "stampede: how long a fill takes")
	fs.BoolVar(&c.Pin, "pin", c.Pin, "run the one-worker cells with GOMAXPROCS=1, the tool and the spawned redis-servers on CPU 0 (Linux)")
	fs.IntVar(&c.PoolSize, "pool-size", c.PoolSize, "go-redis PoolSize per node (0 = go-redis default, 10 x GOMAXPROCS)")
	fs.BoolVar(&c.ContextTimeout, "context-timeout", c.ContextTimeout, "give the go-redis clients of the libraries ContextTimeoutEnabled, as redislock's README recommends (--context-timeout=false: go-redis' default, off)")
	fs.BoolVar(&c.BatchOptions, "batch-options", c.BatchOptions, "give the go-redis clients of the libraries the AutoPipelineOptions redislock's README recommends for many concurrent callers ("+batchNote()+"; --batch-options=false: go-redis' default)")
	fs.Func("libs", "comma-separated substrings of library names to run (default all)", func(s string) error {
		c.Libs = splitList(s)
		return nil
	})
	fs.StringVar(&c.Addr, "addr", c.Addr, "use the Redis at host:port instead of starting one (the runs write keys of their own there)")
	fs.Func("quorum", "use these Redis masters host:port,... for quorum scenarios instead of starting them", func(s string) error {
		c.Quorum = splitList(s)
		return nil
	})
	fs.IntVar(&c.Spawn, "spawn", c.Spawn, "start N redis-server processes on free loopback ports (default: as many as needed if redis-server is on PATH)")
	fs.BoolVar(&c.Miniredis, "miniredis", c.Miniredis, "use embedded miniredis (NOT a real measurement)")
	bindBackendFlags(fs, c)
	fs.BoolVar(&o.JSON, "json", o.JSON, "print JSON instead of the table")
	fs.StringVar(&o.JSONOut, "json-out", o.JSONOut, "also write JSON to `FILE`")
	fs.StringVar(&o.HTML, "html", o.HTML, "write an HTML report with chart to `FILE`")
	fs.StringVar(&o.SVG, "svg", o.SVG, "write the chart as SVG to `FILE`")
	fs.StringVar(&o.FromJSON, "from-json", "", "render outputs from a saved --json-out `FILE` instead of measuring")
	fs.StringVar(&o.MD, "md", o.MD, "write Markdown tables (for a README) to `FILE`")
	fs.StringVar(&o.CPUProfile, "cpuprofile", "", "write a CPU profile of the whole run to `FILE`")
	fs.StringVar(&o.MemProfile, "memprofile", "", "write an allocation profile at the end to `FILE`")
	fs.BoolVar(&o.Strict, "strict", o.Strict, "exit 1 if any run made no progress, had errors or lost a lock (CI smoke)")
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func intList(fs *flag.FlagSet, name, usage string, dst *[]int) {
	def := make([]string, len(*dst))
	for i, n := range *dst {
		def[i] = strconv.Itoa(n)
	}
	fs.Func(name, usage+" (default "+strings.Join(def, ",")+")", func(s string) error {
		var out []int
		for _, p := range splitList(s) {
			n, err := strconv.Atoi(p)
			if err != nil {
				return err
			}
			out = append(out, n)
		}
		*dst = out
		return nil
	})
}
