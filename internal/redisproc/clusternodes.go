package redisproc

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// nodeEntry is one line of CLUSTER NODES:
// <id> <ip:port@cport> <flags> <master> <ping> <pong> <epoch> <link> <slot>...
type nodeEntry struct {
	line      string
	id, addr  string
	flags     string
	masterID  string   // "-" for a master
	link      string   // "connected" or "disconnected"
	slots     [][2]int // owned ranges
	migrating []string // "[slot->-id]" and "[slot-<-id]" (only in the node's own line)
}

func (e *nodeEntry) master() bool { return hasFlag(e.flags, "master") }

// flagged reports a node that is considered failing, not yet joined or
// not connected.
func (e *nodeEntry) flagged() bool {
	if !hasFlag(e.flags, "myself") && e.link != "connected" {
		return true
	}
	for _, f := range []string{"fail", "fail?", "handshake", "noaddr"} {
		if hasFlag(e.flags, f) {
			return true
		}
	}
	return false
}

func hasFlag(flags, f string) bool { return slices.Contains(strings.Split(flags, ","), f) }

// clusterView is one node's CLUSTER NODES.
type clusterView struct {
	self    string // the node's own id
	entries []nodeEntry
}

func parseNodes(s string) (clusterView, error) {
	var v clusterView
	for line := range strings.SplitSeq(strings.TrimSpace(s), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			return v, fmt.Errorf("redisproc: bad CLUSTER NODES line %q", line)
		}
		e := nodeEntry{line: line, id: f[0], flags: f[2], masterID: f[3], link: f[7]}
		e.addr, _, _ = strings.Cut(f[1], "@")
		for _, sl := range f[8:] {
			if strings.HasPrefix(sl, "[") {
				e.migrating = append(e.migrating, sl)
				continue
			}
			lo, hi, isRange := strings.Cut(sl, "-")
			a, err := strconv.Atoi(lo)
			if err != nil {
				return v, fmt.Errorf("redisproc: bad slot %q in %q", sl, line)
			}
			b := a
			if isRange {
				if b, err = strconv.Atoi(hi); err != nil {
					return v, fmt.Errorf("redisproc: bad slot %q in %q", sl, line)
				}
			}
			e.slots = append(e.slots, [2]int{a, b})
		}
		if hasFlag(e.flags, "myself") {
			v.self = e.id
		}
		v.entries = append(v.entries, e)
	}
	return v, nil
}

func (v clusterView) entry(id string) *nodeEntry {
	for i := range v.entries {
		if v.entries[i].id == id {
			return &v.entries[i]
		}
	}
	return nil
}

// owner returns the id of the master that owns slot in this view, or "".
func (v clusterView) owner(slot int) string {
	for _, e := range v.entries {
		for _, r := range e.slots {
			if r[0] <= slot && slot <= r[1] {
				return e.id
			}
		}
	}
	return ""
}

// signature is the view's slot map (which master owns which slots) in a
// canonical form that two agreeing nodes share. Roles of nodes without
// slots are left out: a demoted master tells the others by its own pings,
// which may take half the node timeout, and clients route by slots only.
func (v clusterView) signature() string {
	var lines []string
	for _, e := range v.entries {
		if e.master() && len(e.slots) > 0 {
			lines = append(lines, fmt.Sprintf("%s %s %v", e.id, e.addr, e.slots))
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// roles is the view's roles: every node's id, role and master, in a
// canonical form.
func (v clusterView) roles() string {
	var lines []string
	for _, e := range v.entries {
		role := "replica"
		if e.master() {
			role = "master"
		}
		lines = append(lines, e.id+" "+role+" "+e.masterID)
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// myself is the node's own entry.
func (v clusterView) myself() *nodeEntry { return v.entry(v.self) }

// namedView is the view of the node at addr.
type namedView struct {
	addr string
	clusterView
}

// views returns the CLUSTER NODES view of every running node.
func (c *Cluster) views(ctx context.Context) ([]namedView, error) {
	var vs []namedView
	for _, n := range c.nodes {
		if !n.Running() {
			continue
		}
		s, err := doString(ctx, n.Server, "CLUSTER", "NODES")
		if err != nil {
			return nil, fmt.Errorf("redisproc: CLUSTER NODES on %s: %w", n.Addr(), err)
		}
		v, err := parseNodes(s)
		if err != nil {
			return nil, err
		}
		vs = append(vs, namedView{n.Addr(), v})
	}
	if len(vs) == 0 {
		return nil, fmt.Errorf("redisproc: no cluster node is running")
	}
	return vs, nil
}

// agreedView returns the view of a running node, after checking that
// every running node agrees with it on the slot map (an error naming two
// that differ).
func (c *Cluster) agreedView(ctx context.Context) (clusterView, error) {
	vs, err := c.views(ctx)
	if err != nil {
		return clusterView{}, err
	}
	want := vs[0].signature()
	for _, v := range vs[1:] {
		if v.signature() != want {
			return clusterView{}, fmt.Errorf("redisproc: %s and %s disagree on the cluster configuration", vs[0].addr, v.addr)
		}
	}
	return vs[0].clusterView, nil
}
