package lockbench

import (
	"fmt"
	"io"
	"strings"
)

// WriteMarkdown writes compact result tables for a README: the headline
// metrics of each scenario, median (min–max) over the repetitions.
func WriteMarkdown(w io.Writer, rep *Report) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Target: %s, go-redis pool size %d%s; %s, %d CPU. %d interleaved repetitions of %s (after %s warm-up); median (min–max). Latencies in µs%s.\n",
		rep.Target.Label, rep.Target.PoolSize, clientNote(rep.Target), rep.Machine.GoVersion, rep.Machine.NumCPU, rep.Config.Reps, rep.Config.Duration, rep.Config.Warmup, loadNote(rep.Machine))
	if !rep.Target.Real {
		b.WriteString("\n**miniredis: NOT a real measurement.**\n")
	}
	unc, hot, ren := scenarioGroups(rep)
	if len(unc) > 0 {
		fmt.Fprintf(&b, "\n**Uncontended** (each worker: Obtain + Release, %s)\n\n", keyMode(rep.Config))
		b.WriteString("| nodes | workers | library | pairs/s | × first | p50 | p99 | allocs/pair | Redis calls/pair | Redis CPU µs/pair | sent/pair | keys left/lock |\n|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, g := range unc {
			ref := metric(g[0], MOpsPerSec)
			for _, r := range g {
				fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Nodes, workersOf(r), mdLib(r), spread(r, MOpsPerSec),
					fmtNum(metric(r, MOpsPerSec)/ref), med(r, MLatP50), med(r, MLatP99), med(r, MAllocsPerOp), med(r, MCallsPerOp), med(r, MRedisCPUPerOp), med(r, MSentPerOp), med(r, MKeysLeft))
			}
		}
	}
	if len(hot) > 0 {
		fmt.Fprintf(&b, "\n**Hot key** (workers contend on one key; hold %s, think %s)\n\n", rep.Config.Hold, rep.Config.Think)
		b.WriteString("| nodes | workers | library | grants/s | handoffs/s | handoff p50 | handoff p99 | wait p50 | wait p99 | wait max | fairness | allocs/grant | Redis calls/grant | Redis CPU µs/grant | sent/grant |\n|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, g := range hot {
			for _, r := range g {
				fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Nodes, workersOf(r), mdLib(r), spread(r, MOpsPerSec),
					med(r, MHandoffsPerSec), spread(r, MHandoffP50), spread(r, MHandoffP99), med(r, MWaitP50), spread(r, MWaitP99), med(r, MWaitMax),
					med(r, MFairness), med(r, MAllocsPerOp), med(r, MCallsPerOp), med(r, MRedisCPUPerOp), med(r, MSentPerOp))
			}
		}
	}
	if len(ren) > 0 {
		fmt.Fprintf(&b, "\n**Renew** (locks held with auto-renewal, TTL %s, renewed every TTL/3)\n\n", rep.Config.RenewTTL)
		b.WriteString("| library | locks | Redis calls/s | sent/s | goroutines/lock | heap B/lock | lost |\n|---|---:|---:|---:|---:|---:|---:|\n")
		for _, g := range ren {
			for _, r := range g {
				fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s |\n", mdLib(r), r.Workers, spread(r, MRenewCalls), med(r, MRenewSent),
					med(r, MGoroutines), med(r, MHeapPerLock), med(r, MLost))
			}
		}
	}
	writeStampedeMarkdown(&b, rep)
	writeBlackholeTable(&b, rep, true)
	writeCommandTable(&b, rep, true)
	_, err := io.WriteString(w, b.String())
	return err
}

func mdLib(r *Result) string {
	if n := noteOf(r); n != "" {
		return r.Library + " (" + n + ")"
	}
	return r.Library
}
