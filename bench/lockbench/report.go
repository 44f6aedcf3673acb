package lockbench

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"strings"
	"text/tabwriter"
)

// WriteOutputs prints the table (or JSON with o.JSON) to stdout and writes
// the files o names.
func WriteOutputs(rep *Report, o Output, stdout io.Writer) error {
	if o.JSON {
		if err := WriteJSON(stdout, rep); err != nil {
			return err
		}
	} else {
		WriteTable(stdout, rep)
	}
	write := func(name string, fn func(io.Writer) error) error {
		if name == "" {
			return nil
		}
		f, err := os.Create(name)
		if err != nil {
			return err
		}
		if err := fn(f); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	return errJoin(
		write(o.JSONOut, func(w io.Writer) error { return WriteJSON(w, rep) }),
		write(o.SVG, func(w io.Writer) error { _, err := io.WriteString(w, SVG(rep)); return err }),
		write(o.HTML, func(w io.Writer) error { return WriteHTML(w, rep) }),
		write(o.MD, func(w io.Writer) error { return WriteMarkdown(w, rep) }),
	)
}

func errJoin(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// WriteJSON writes the report as indented JSON.
func WriteJSON(w io.Writer, rep *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(rep)
}

func isHot(s string) bool { return strings.HasSuffix(s, Hotkey) }

// fmtNum prints a number with about three significant digits.
func fmtNum(v float64) string {
	switch a := math.Abs(v); {
	case math.IsNaN(v):
		return "-"
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func med(r *Result, m string) string {
	s, ok := r.Metrics[m]
	if !ok {
		return "-"
	}
	return fmtNum(s.Median)
}

func spread(r *Result, m string) string {
	s, ok := r.Metrics[m]
	if !ok {
		return "-"
	}
	if len(r.Samples) < 2 {
		return fmtNum(s.Median)
	}
	return fmt.Sprintf("%s (%s–%s)", fmtNum(s.Median), fmtNum(s.Min), fmtNum(s.Max))
}

func metric(r *Result, m string) float64 {
	if s, ok := r.Metrics[m]; ok {
		return s.Median
	}
	return math.NaN()
}

// groupsOf splits results into comparable groups, in run order.
func groupsOf(rep *Report) [][]*Result {
	var out [][]*Result
	idx := map[string]int{}
	for _, r := range rep.Results {
		k := fmt.Sprintf("%s/%d/%d", r.Scenario, r.Workers, r.Nodes)
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], r)
	}
	return out
}

// WriteTable prints human-readable tables, one per scenario kind.
func WriteTable(w io.Writer, rep *Report) {
	fmt.Fprintf(w, "target: %s; pool size %d%s; %s %s/%s, %d CPU, GOMAXPROCS %d\n",
		rep.Target.Label, rep.Target.PoolSize, clientNote(rep.Target), rep.Machine.GoVersion, rep.Machine.GOOS, rep.Machine.GOARCH, rep.Machine.NumCPU, rep.Machine.GOMAXPROCS)
	fmt.Fprintf(w, "duration %s, warm-up %s, %d rep(s), libraries interleaved; median (min–max); latencies in µs%s\n",
		rep.Config.Duration, rep.Config.Warmup, rep.Config.Reps, loadNote(rep.Machine))
	if !rep.Target.Real {
		fmt.Fprintln(w, "*** miniredis: NOT a real measurement ***")
	}
	unc, hot, ren := scenarioGroups(rep)
	if len(unc) > 0 {
		fmt.Fprintf(w, "\nUncontended: Obtain+Release pairs, %s; keys left = keys on the nodes after the run per released lock and node (no TTL: how many had no expiry)\n", keyMode(rep.Config))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "scenario\tnodes\tworkers\tlibrary\tops/s\tx first\tp50\tp99\tmax\tallocs/op\tB/op\tredis calls/op\tredis CPU µs/op\tsent/op\tkeys left\tno TTL\terrors\tnote\t")
		for _, g := range unc {
			ref := metric(g[0], MOpsPerSec)
			for _, r := range g {
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Scenario, r.Nodes, workersOf(r), r.Library,
					spread(r, MOpsPerSec), fmtNum(metric(r, MOpsPerSec)/ref), med(r, MLatP50), med(r, MLatP99), med(r, MLatMax),
					med(r, MAllocsPerOp), med(r, MBytesPerOp), med(r, MCallsPerOp), med(r, MRedisCPUPerOp), med(r, MSentPerOp), med(r, MKeysLeft), med(r, MKeysNoTTL), med(r, MErrors), noteOf(r))
			}
		}
		tw.Flush()
	}
	if len(hot) > 0 {
		fmt.Fprintf(w, "\nHot key: workers contend on one key (hold %s, think %s); wait = wanting -> holding; handoff = release -> grant to another worker\n", rep.Config.Hold, rep.Config.Think)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "scenario\tnodes\tworkers\tlibrary\tgrants/s\thandoffs/s\thandoff p50\thandoff p99\twait p50\twait p99\twait max\tfairness\tgave up/s\tredis calls/grant\tredis CPU µs/grant\tsent/grant\tallocs/grant\terrors\tnote\t")
		for _, g := range hot {
			for _, r := range g {
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Scenario, r.Nodes, workersOf(r), r.Library,
					spread(r, MOpsPerSec), med(r, MHandoffsPerSec), spread(r, MHandoffP50), spread(r, MHandoffP99),
					med(r, MWaitP50), spread(r, MWaitP99), med(r, MWaitMax), med(r, MFairness), med(r, MGaveUp),
					med(r, MCallsPerOp), med(r, MRedisCPUPerOp), med(r, MSentPerOp), med(r, MAllocsPerOp), med(r, MErrors), noteOf(r))
			}
		}
		tw.Flush()
	}
	if len(ren) > 0 {
		fmt.Fprintf(w, "\nRenew: locks held with auto-renewal (TTL %s, renewed every TTL/3)\n", rep.Config.RenewTTL)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "library\tlocks\tredis calls/s\tsent/s\tgoroutines/lock\theap B/lock\tlost\terrors\tnote\t")
		for _, g := range ren {
			for _, r := range g {
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Library, r.Workers, spread(r, MRenewCalls), med(r, MRenewSent),
					med(r, MGoroutines), med(r, MHeapPerLock), med(r, MLost), med(r, MErrors), noteOf(r))
			}
		}
		tw.Flush()
	}
	writeStampedeTable(w, rep)
	writeBlackholeTable(w, rep, false)
	writeCommandTable(w, rep, false)
	fmt.Fprintln(w, "\nlibraries:")
	names := make([]string, 0, len(rep.Libraries))
	for _, r := range rep.Results {
		if _, ok := rep.Libraries[r.Library]; ok && !contains(names, r.Library) {
			names = append(names, r.Library)
		}
	}
	for _, n := range names {
		fmt.Fprintf(w, "  %-22s %s\n", n, rep.Libraries[n])
	}
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// palette for libraries, by order of appearance.
var palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"}

// SVG renders throughput and latency (p50 solid, p99 light) per library per
// scenario as a self-contained SVG document.
func SVG(rep *Report) string {
	const (
		width  = 980
		rowH   = 16
		headH  = 34
		gap    = 14
		nameW  = 170
		tputX  = 180
		tputW  = 300
		latX   = 600
		latW   = 340
		margin = 10
	)
	colors := map[string]string{}
	for _, r := range rep.Results {
		if _, ok := colors[r.Library]; !ok {
			colors[r.Library] = palette[len(colors)%len(palette)]
		}
	}
	var groups [][]*Result
	for _, g := range groupsOf(rep) {
		if g[0].Scenario != Renew && !isStampede(g) && g[0].Scenario != Blackhole && len(g[0].Samples) > 0 {
			groups = append(groups, g)
		}
	}
	height := 70
	for _, g := range groups {
		height += headH + len(g)*rowH + gap
	}
	var b strings.Builder
	esc := html.EscapeString
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	title := "redislock benchmark — " + rep.Target.Label
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="14" font-weight="bold">%s</text>`+"\n", margin, esc(title))
	fmt.Fprintf(&b, `<text x="%d" y="38" fill="#444">%s; median of %d rep(s), whiskers min–max; latency axis is logarithmic (p50 dark, p99 light)</text>`+"\n",
		margin, esc(fmt.Sprintf("%s, %d CPU, pool %d%s, %s per run", rep.Machine.GoVersion, rep.Machine.NumCPU, rep.Target.PoolSize, clientNote(rep.Target), rep.Config.Duration)), rep.Config.Reps)
	if !rep.Target.Real {
		fmt.Fprintf(&b, `<text x="%d" y="54" fill="#c00" font-weight="bold">miniredis: NOT a real measurement</text>`+"\n", margin)
	}
	y := 70
	for _, g := range groups {
		hot := isHot(g[0].Scenario)
		tputLabel, p50, p99 := "ops/s (Obtain+Release)", MLatP50, MLatP99
		if hot {
			tputLabel, p50, p99 = "grants/s", MWaitP50, MWaitP99
		}
		var tmax, lmax, lmin float64 = 0, 0, math.Inf(1)
		for _, r := range g {
			if s, ok := r.Metrics[MOpsPerSec]; ok {
				tmax = math.Max(tmax, s.Max)
			}
			for _, m := range []string{p50, p99} {
				if s, ok := r.Metrics[m]; ok && s.Median > 0 {
					lmax = math.Max(lmax, s.Median)
					lmin = math.Min(lmin, s.Median)
				}
			}
		}
		lo := math.Pow(10, math.Floor(math.Log10(math.Max(lmin, 10)))-1)
		hi := math.Pow(10, math.Ceil(math.Log10(math.Max(lmax, lo*10))))
		lx := func(v float64) float64 {
			if v <= lo {
				return 0
			}
			return latW * math.Log10(v/lo) / math.Log10(hi/lo)
		}
		head := fmt.Sprintf("%s — %d worker(s), %d node(s)", g[0].Scenario, g[0].Workers, g[0].Nodes)
		if hot && (rep.Config.Hold > 0 || rep.Config.Think > 0) {
			head += fmt.Sprintf(", hold %s, think %s", rep.Config.Hold, rep.Config.Think)
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", margin, y+14, esc(head))
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#444">%s</text>`+"\n", tputX, y+28, esc(tputLabel))
		lname := "Obtain+Release latency, µs, p50 / p99"
		if hot {
			lname = "wait (wanting → holding), µs, p50 / p99"
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#444">%s</text>`+"\n", latX, y+14, esc(lname))
		for d := lo; d <= hi*1.0001; d *= 10 {
			x := float64(latX) + lx(d)
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`+"\n", x, y+headH-2, x, y+headH+len(g)*rowH)
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" fill="#888" font-size="9" text-anchor="middle">%s</text>`+"\n", x, y+28, fmtNum(d))
		}
		y += headH
		for _, r := range g {
			c := colors[r.Library]
			fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", margin, y+12, esc(r.Library))
			if s, ok := r.Metrics[MOpsPerSec]; ok && tmax > 0 {
				w := tputW * s.Median / tmax
				fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", tputX, y+2, w, rowH-4, c)
				fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#000"/>`+"\n",
					float64(tputX)+tputW*s.Min/tmax, y+rowH/2, float64(tputX)+tputW*s.Max/tmax, y+rowH/2)
				fmt.Fprintf(&b, `<text x="%.1f" y="%d">%s</text>`+"\n", float64(tputX)+tputW*s.Max/tmax+4, y+12, fmtNum(s.Median))
			}
			if s, ok := r.Metrics[p99]; ok {
				fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s" fill-opacity="0.35"/>`+"\n", latX, y+2, lx(s.Median), rowH-4, c)
			}
			if s, ok := r.Metrics[p50]; ok {
				fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", latX, y+2, lx(s.Median), rowH-4, c)
			}
			fmt.Fprintf(&b, `<text x="%.1f" y="%d">%s / %s</text>`+"\n", float64(latX)+lx(metric(r, p99))+4, y+12, fmtNum(metric(r, p50)), fmtNum(metric(r, p99)))
			y += rowH
		}
		y += gap
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// WriteHTML writes a standalone page: the chart, the tables and the JSON.
func WriteHTML(w io.Writer, rep *Report) error {
	var tbl strings.Builder
	WriteTable(&tbl, rep)
	var js strings.Builder
	if err := WriteJSON(&js, rep); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, `<!doctype html>
<html><head><meta charset="utf-8"><title>redislock benchmark</title>
<style>body{font-family:sans-serif;margin:1em} pre{font-size:12px;overflow-x:auto}</style></head>
<body><h1>redislock benchmark</h1>
<p>%s</p>
%s
<h2>Tables</h2><pre>%s</pre>
<details><summary>JSON</summary><pre>%s</pre></details>
</body></html>
`, html.EscapeString(rep.Command), SVG(rep), html.EscapeString(tbl.String()), html.EscapeString(js.String()))
	return err
}

// scenarioGroups splits the report's result groups by kind of table:
// uncontended (and quorum-uncontended), hot key, renew.
func scenarioGroups(rep *Report) (unc, hot, ren [][]*Result) {
	for _, g := range groupsOf(rep) {
		switch {
		case g[0].Scenario == Renew:
			ren = append(ren, g)
		case isStampede(g): // its own table (stampede.go)
		case g[0].Scenario == Blackhole: // its own table (blackhole.go)
		case isHot(g[0].Scenario):
			hot = append(hot, g)
		default:
			unc = append(unc, g)
		}
	}
	return unc, hot, ren
}

// keyMode says which keys the uncontended workers lock.
func keyMode(c Config) string {
	if c.FreshKeys {
		return "a fresh key per pair (--fresh-keys)"
	}
	return "each worker on its own key (--same-key)"
}
