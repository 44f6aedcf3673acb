package lockbench

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// writeCommandTable writes what the servers did per op, for each cell:
// their CPU time (INFO cpu) and, per command (INFO commandstats), its
// calls per op and µs per call. Commands inside a script are counted on
// their own, and their time in the script's (EVALSHA) as well.
func writeCommandTable(w io.Writer, rep *Report, md bool) {
	var rows [][]string
	for _, g := range groupsOf(rep) {
		for _, r := range g {
			if cmds := commandsOf(r); cmds != "" {
				rows = append(rows, []string{r.Scenario, fmt.Sprint(r.Nodes), workersOf(r), r.Library, med(r, MRedisCPUPerOp), cmds})
			}
		}
	}
	if len(rows) == 0 {
		return
	}
	if md {
		fmt.Fprint(w, "\n**Redis per op** (server CPU from `INFO cpu`; per command from `INFO commandstats`: calls per op × µs per call; the commands inside scripts are counted on their own, and their time in the `EVALSHA`'s too)\n\n")
		fmt.Fprint(w, "| scenario | nodes | workers | library | Redis CPU µs/op | commands: calls/op × µs/call |\n|---|---:|---:|---|---:|---|\n")
		for _, r := range rows {
			fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
		}
		return
	}
	fmt.Fprintln(w, "\nRedis per op: server CPU (INFO cpu) in µs; per command (INFO commandstats) calls/op × µs/call, commands inside scripts counted on their own and in the script's time")
	for _, r := range rows {
		fmt.Fprintf(w, "  %s n=%s w=%s %-22s cpu %s µs: %s\n", r[0], r[1], r[2], r[3], r[4], r[5])
	}
}

// commandsOf lists a result's commands, costliest first: "evalsha 2.00 ×
// 9.81, get 2.00 × 0.52, ...".
func commandsOf(r *Result) string {
	type cmd struct {
		name        string
		calls, usec float64
	}
	var cs []cmd
	for k, s := range r.Metrics {
		name, ok := strings.CutPrefix(k, MCmdCalls)
		if !ok {
			continue
		}
		cs = append(cs, cmd{name, s.Median, metric(r, MCmdUsec+name)})
	}
	sort.Slice(cs, func(i, j int) bool {
		if a, b := cs[i].calls*cs[i].usec, cs[j].calls*cs[j].usec; a != b {
			return a > b
		}
		return cs[i].name < cs[j].name
	})
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = fmt.Sprintf("%s %s × %s", c.name, fmtNum(c.calls), fmtNum(c.usec))
	}
	return strings.Join(parts, ", ")
}

// workersOf is a result's worker count, marked when the cell ran pinned.
func workersOf(r *Result) string {
	if r.Pinned {
		return fmt.Sprintf("%d, pinned", r.Workers)
	}
	return fmt.Sprint(r.Workers)
}

// noteOf is a result's note, with the repetitions of a hot key that
// granted nothing (their wait and handoff figures are missing from the
// medians; the grants/s range shows the 0) and those whose workers had to
// be cancelled to stop (MStalled).
func noteOf(r *Result) string {
	idle, stalled := 0, 0
	for _, s := range r.Samples {
		if s[MIdle] == 1 {
			idle++
		}
		if s[MStalled] > 0 {
			stalled++
		}
	}
	n := r.Note
	add := func(s string) {
		if n != "" {
			n += "; "
		}
		n += s
	}
	if idle > 0 {
		add(fmt.Sprintf("NO GRANT in %d of %d repetitions", idle, len(r.Samples)))
	}
	if stalled > 0 {
		add(fmt.Sprintf("STALLED workers cancelled in %d of %d repetitions", stalled, len(r.Samples)))
	}
	return n
}

// loadNote is the load averages the run began and ended with, when known.
func loadNote(m Machine) string {
	if m.LoadBefore == "" {
		return ""
	}
	return fmt.Sprintf("; load average %s before, %s after", m.LoadBefore, m.LoadAfter)
}
