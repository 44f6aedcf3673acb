package lockbench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Result is one cell (scenario x parameters x library), over all repetitions.
type Result struct {
	Scenario string `json:"scenario"` // uncontended, hotkey, quorum-uncontended, quorum-hotkey, renew
	Library  string `json:"library"`
	Workers  int    `json:"workers"` // workers, or locks held for renew
	Nodes    int    `json:"nodes"`
	// Metrics are medians with min and max over the repetitions.
	Metrics map[string]Stat      `json:"metrics"`
	Samples []map[string]float64 `json:"samples"`
	Note    string               `json:"note,omitempty"`
	// Pinned: the cell ran with GOMAXPROCS 1, the tool and the servers on
	// one CPU (Config.Pin).
	Pinned bool `json:"pinned,omitempty"`
}

// Machine describes where the run happened.
type Machine struct {
	GOOS       string `json:"goos"`
	GOARCH     string `json:"goarch"`
	NumCPU     int    `json:"num_cpu"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	GoVersion  string `json:"go_version"`
	// LoadBefore and LoadAfter are the load averages (1, 5, 15 minutes)
	// when the run started and ended, where the system tells them.
	LoadBefore string `json:"load_before,omitempty"`
	LoadAfter  string `json:"load_after,omitempty"`
}

// Report is everything one run produced.
type Report struct {
	Started   time.Time         `json:"started"`
	Command   string            `json:"command,omitempty"`
	Target    TargetInfo        `json:"target"`
	Machine   Machine           `json:"machine"`
	Config    Config            `json:"config"`
	Libraries map[string]string `json:"libraries"` // name -> how it is configured
	Results   []*Result         `json:"results"`
}

// pinned reports whether the cell runs pinned (Config.Pin): a cell of one
// worker, in a scenario where the worker count is the callers of the lock.
func (c *cell) pinned(cfg *Config) bool {
	return cfg.Pin && c.workers == 1 && c.scenario != Renew && c.scenario != Stampede
}

type cell struct {
	scenario string
	workers  int
	nodes    int
	lib      Library
	res      *Result
	failed   bool
}

// plan lists the cells in groups; within a group the libraries are compared.
func plan(cfg *Config, libs []Library, nodesAvail int) ([][]*cell, []string) {
	var groups [][]*cell
	var notes []string
	add := func(scenario string, workers, nodes int, pick func(Library) bool) {
		var g []*cell
		for _, l := range libs {
			if pick(l) {
				g = append(g, &cell{scenario: scenario, workers: workers, nodes: nodes, lib: l})
			}
		}
		if len(g) > 0 {
			groups = append(groups, g)
		}
	}
	primary := func(l Library) bool { return l.Primary }
	all := func(Library) bool { return true }
	for _, s := range cfg.Scenarios {
		switch s {
		case Uncontended:
			for _, w := range cfg.Workers {
				add(Uncontended, w, 1, primary)
			}
		case Hotkey:
			for _, w := range cfg.HotWorkers {
				add(Hotkey, w, 1, all)
			}
		case Quorum:
			for _, n := range cfg.QuorumSizes {
				if n > nodesAvail {
					notes = append(notes, fmt.Sprintf("quorum N=%d skipped: only %d node(s) available", n, nodesAvail))
					continue
				}
				q := func(l Library) bool { return l.Quorum && l.Primary }
				add("quorum-"+Uncontended, 1, n, q)
				for _, w := range cfg.HotWorkers {
					add("quorum-"+Hotkey, w, n, func(l Library) bool { return l.Quorum })
				}
			}
		case Renew:
			add(Renew, cfg.RenewLocks, 1, primary)
		case Stampede:
			if g := stampedeCells(cfg, libs); len(g) > 0 {
				groups = append(groups, g)
			}
		case Blackhole:
			g, note := blackholeCells(cfg, libs, nodesAvail)
			if len(g) > 0 {
				groups = append(groups, g)
			}
			if note != "" {
				notes = append(notes, note)
			}
		}
	}
	return groups, notes
}

// filterLibs returns the libraries whose names contain one of want (all
// when want is empty); a name in want that matches none is an error.
func filterLibs(libs []Library, want []string) ([]Library, error) {
	if len(want) == 0 {
		return libs, nil
	}
	var out []Library
	for _, l := range libs {
		for _, w := range want {
			if strings.Contains(l.Name, w) {
				out = append(out, l)
				break
			}
		}
	}
	for _, w := range want {
		found := false
		for _, l := range out {
			found = found || strings.Contains(l.Name, w)
		}
		if !found {
			names := make([]string, len(libs))
			for i, l := range libs {
				names[i] = l.Name
			}
			return nil, fmt.Errorf("-libs %q matches no library (known: %s)", w, strings.Join(names, ", "))
		}
	}
	return out, nil
}

// Run measures libs as cfg says and returns the report. progress, if not
// nil, receives a one-line status per run.
func Run(ctx context.Context, cfg Config, libs []Library, progress io.Writer) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	libs, err := filterLibs(filterBackend(libs, cfg.Backend), cfg.Libs)
	if err != nil {
		return nil, err
	}
	if len(libs) == 0 {
		return nil, errors.New("no library selected")
	}
	t, err := openTarget(ctx, &cfg, cfg.needNodes())
	if err != nil {
		return nil, err
	}
	defer t.close()

	rep := &Report{
		Started: time.Now().UTC(),
		Target:  t.info,
		Machine: Machine{GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, NumCPU: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0),
			GoVersion: runtime.Version(), LoadBefore: loadAverage()},
		Config: cfg, Libraries: map[string]string{},
	}
	for _, l := range libs {
		rep.Libraries[l.Name] = l.Note
	}
	groups, notes := plan(&cfg, libs, len(t.clients))
	for _, n := range notes {
		fmt.Fprintln(os.Stderr, "lockbench:", n)
	}
	if len(groups) == 0 {
		names := make([]string, len(libs))
		for i, l := range libs {
			names[i] = l.Name
		}
		return nil, fmt.Errorf("the scenarios %s measure none of %s (uncontended, quorum-uncontended and renew measure the primary libraries only)",
			strings.Join(cfg.Scenarios, ","), strings.Join(names, ", "))
	}
	total := 0
	for _, g := range groups {
		total += len(g) * cfg.Reps
		for _, c := range g {
			c.res = &Result{Scenario: c.scenario, Library: c.lib.Name, Workers: c.workers, Nodes: c.nodes, Pinned: c.pinned(&cfg)}
			rep.Results = append(rep.Results, c.res)
		}
	}
	done := 0
	for r := range cfg.Reps {
		for _, g := range groups {
			for i := range g { // rotate the order so no library always goes first
				c := g[(i+r)%len(g)]
				done++
				if c.failed {
					continue
				}
				if progress != nil {
					fmt.Fprintf(progress, "\r\033[K[%d/%d] rep %d/%d %s w=%d n=%d %s", done, total, r+1, cfg.Reps, c.scenario, c.workers, c.nodes, c.lib.Name)
				}
				s, err := runCell(ctx, &cfg, t, c)
				if errors.Is(err, errSkip) {
					c.res.Note = "not supported by this adapter"
					continue
				}
				if errors.Is(err, errFailed) || errors.Is(err, errStalled) && ctx.Err() == nil {
					// A stalled cell keeps the samples of its earlier
					// repetitions, a failed one none.
					c.failed = true
					if errors.Is(err, errFailed) {
						c.res.Samples = nil
					}
					c.res.Note = fmt.Sprintf("%v (repetition %d)", err, r+1)
					fmt.Fprintf(os.Stderr, "\nlockbench: %s w=%d n=%d %s: %v\n", c.scenario, c.workers, c.nodes, c.lib.Name, err)
					continue
				}
				if err != nil {
					if ctx.Err() != nil {
						return rep, ctx.Err()
					}
					return rep, fmt.Errorf("%s w=%d n=%d %s: %w", c.scenario, c.workers, c.nodes, c.lib.Name, err)
				}
				c.res.Samples = append(c.res.Samples, s)
			}
		}
	}
	if progress != nil {
		fmt.Fprint(progress, "\r\033[K")
	}
	rep.Machine.LoadAfter = loadAverage()
	for _, res := range rep.Results {
		res.Metrics = map[string]Stat{}
		for i, s := range res.Samples {
			for k, v := range s {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					delete(res.Samples[i], k)
				}
			}
		}
		keys := map[string]bool{}
		for _, s := range res.Samples {
			for k := range s {
				keys[k] = true
			}
		}
		for k := range keys {
			var vals []float64
			for _, s := range res.Samples {
				if v, ok := s[k]; ok {
					vals = append(vals, v)
				}
			}
			res.Metrics[k] = summarize(vals)
		}
	}
	return rep, nil
}

func runID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func runCell(ctx context.Context, cfg *Config, t *target, c *cell) (map[string]float64, error) {
	if c.pinned(cfg) {
		unpin, err := t.pin()
		if err != nil {
			return nil, err
		}
		defer unpin()
	}
	// The cell's workers run on a context of their own: a worker that has
	// not returned StopGrace after being told to stop is cancelled
	// (failures.stop).
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	f := failures{cancel: cancel, grace: cfg.StopGrace}
	if c.scenario == Blackhole { // lockers of its own (blackhole.go)
		s, err := runBlackhole(ctx, cfg, t, c, runID(), &f)
		if ferr := f.err(); ferr != nil {
			return nil, ferr
		}
		return s, err
	}
	var lk Locker
	var err error
	switch {
	case c.lib.Postgres != nil:
		lk, err = c.lib.Postgres(t.pg.pool, t.pg.table())
	case c.lib.Dial != nil:
		lk, err = c.lib.Dial(t.info.Nodes[:c.nodes], func(n int) { t.sent.Add(int64(n)) })
	default:
		lk, err = c.lib.New(t.nodes(c.nodes))
	}
	if err != nil {
		return nil, err
	}
	id := runID()
	var s map[string]float64
	switch c.scenario {
	case Uncontended, "quorum-" + Uncontended:
		s, err = runUncontended(ctx, cfg, t, lk, c.workers, c.nodes, id, &f)
	case Hotkey, "quorum-" + Hotkey:
		s, err = runHotkey(ctx, cfg, t, lk, c.workers, c.nodes, id, &f)
	case Renew:
		s, err = runRenew(ctx, cfg, t, lk, c.workers, id, &f)
	case Stampede:
		s, err = runStampede(ctx, cfg, t, lk, c.workers, c.nodes, id, &f)
	default:
		err = fmt.Errorf("unknown scenario %q", c.scenario)
	}
	if !errors.Is(err, errStalled) { // else its workers may still use it
		err = errors.Join(err, closeBounded(lk, cfg.StopGrace))
	}
	if ferr := f.err(); ferr != nil {
		return nil, ferr
	}
	return s, err
}

// errFailed marks a cell whose library failed (panicked): the cell is
// reported as FAILED and skipped in later repetitions; the run goes on.
var errFailed = errors.New("FAILED")

// Invocation is how the tool was run, and how it can be run.
type Invocation struct {
	// Command is this run's command without its flags, recorded in the
	// report so that the run can be repeated.
	Command string
	// Forms are the ways to run the tool, each without its flags, for the
	// usage line (Command if none).
	Forms []string
	// Note follows the forms in the usage (optional).
	Note string
}

// Main is the command-line entry point of the bench tool: it parses args,
// runs, and writes the outputs. It returns the exit code.
func Main(inv Invocation, args []string, libs []Library, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(inv.Command, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := DefaultConfig()
	var out Output
	BindFlags(fs, &cfg, &out)
	fs.Usage = func() {
		forms := inv.Forms
		if len(forms) == 0 {
			forms = []string{inv.Command}
		}
		fmt.Fprintln(stderr, "Usage:")
		for _, f := range forms {
			fmt.Fprintf(stderr, "  %s [flags]\n", f)
		}
		if inv.Note != "" {
			fmt.Fprintf(stderr, "%s\n", inv.Note)
		}
		fmt.Fprint(stderr, "\nLibraries: ")
		for i, l := range libs {
			if i > 0 {
				fmt.Fprint(stderr, ", ")
			}
			fmt.Fprint(stderr, l.Name)
		}
		fmt.Fprint(stderr, "\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "lockbench: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if out.FromJSON != "" {
		rep, err := readReport(out.FromJSON)
		if err == nil {
			err = WriteOutputs(rep, out, stdout)
		}
		if err != nil {
			fmt.Fprintln(stderr, "lockbench:", err)
			return 1
		}
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var progress io.Writer
	if f, ok := stderr.(*os.File); ok && isTerminal(f) {
		progress = stderr
	}
	if out.CPUProfile != "" {
		f, err := os.Create(out.CPUProfile)
		if err != nil {
			fmt.Fprintln(stderr, "lockbench:", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(stderr, "lockbench:", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	rep, err := Run(ctx, cfg, libs, progress)
	if out.MemProfile != "" {
		if f, ferr := os.Create(out.MemProfile); ferr == nil {
			_ = pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "lockbench:", err)
		return 1
	}
	rep.Command = strings.TrimSpace(inv.Command + " " + strings.Join(args, " "))
	if err := WriteOutputs(rep, out, stdout); err != nil {
		fmt.Fprintln(stderr, "lockbench:", err)
		return 1
	}
	if out.Strict {
		if problems := Problems(rep); len(problems) > 0 {
			for _, p := range problems {
				fmt.Fprintln(stderr, "lockbench: strict:", p)
			}
			return 1
		}
	}
	return 0
}

// Problems lists results that show a broken run rather than a slow one:
// missing samples, no progress, errors, locks found gone. A lease that ran
// out before its renewal got through is what a stalled machine does to a
// short TTL, so renew leases that expired are a problem only when half
// the held locks or more did: renewal that does not work at all.
func Problems(rep *Report) []string {
	var out []string
	for _, r := range rep.Results {
		id := fmt.Sprintf("%s w=%d n=%d %s", r.Scenario, r.Workers, r.Nodes, r.Library)
		if strings.HasPrefix(r.Note, errStalled.Error()) {
			out = append(out, id+": "+r.Note)
		}
		if len(r.Samples) == 0 {
			if r.Note == "" || strings.HasPrefix(r.Note, errFailed.Error()) {
				out = append(out, id+": no samples "+r.Note)
			}
			continue
		}
		progress := MOpsPerSec
		if r.Scenario == Renew {
			progress = MRenewSent
		}
		if s, ok := r.Metrics[progress]; !ok || s.Min <= 0 {
			out = append(out, id+": no progress ("+progress+")")
		}
		for _, m := range []string{MErrors, MLost, MStalled} {
			if s, ok := r.Metrics[m]; ok && s.Max > 0 {
				out = append(out, fmt.Sprintf("%s: %s = %v", id, m, s.Max))
			}
		}
		if s, ok := r.Metrics[MLostExpired]; ok && s.Max > 0 && 2*s.Max >= float64(r.Workers) {
			out = append(out, fmt.Sprintf("%s: %s = %v of %d", id, MLostExpired, s.Max, r.Workers))
		}
	}
	return out
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// compile-time check that the shared clients satisfy what libraries take.
var _ redis.UniversalClient = (*redis.Client)(nil)

func readReport(name string) (*Report, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &rep, nil
}
