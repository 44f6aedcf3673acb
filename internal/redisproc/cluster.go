package redisproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock/internal/lifeline"
)

// Cluster defaults.
const (
	DefaultMasters  = 3
	DefaultReplicas = 1 // per master
	// NoReplicas, as ClusterConfig.Replicas, starts masters only.
	NoReplicas         = -1
	DefaultNodeTimeout = 5 * time.Second
	clusterLogLevel    = "notice" // the log tells a failed test what the cluster did
	slots              = 16384
)

// ClusterConfig describes a Redis Cluster on loopback.
type ClusterConfig struct {
	// Masters is the number of masters; default DefaultMasters (at least
	// 3, as redis-cli --cluster create requires).
	Masters int
	// Replicas is the number of replicas of each master; default
	// DefaultReplicas, NoReplicas for none.
	Replicas int
	// NodeTimeout is cluster-node-timeout; default DefaultNodeTimeout.
	NodeTimeout time.Duration
	// Bin and CLI are redis-server and redis-cli; "" looks them up on PATH.
	Bin, CLI string
	// Args are extra command-line config for every node.
	Args []string
}

// Node is one server of a Cluster with its cluster node ID.
type Node struct {
	*Server
	ID string
}

// Cluster is a Redis Cluster of redis-server processes on loopback, built
// with redis-cli --cluster create. Its methods are safe for concurrent
// use, but the faults they inject (migrations, failovers) are meant to be
// run one at a time.
type Cluster struct {
	cfg   ClusterConfig
	nodes []*Node
}

// StartCluster starts Masters*(1+Replicas) nodes, joins them into a
// cluster with redis-cli (the first Masters nodes become masters, redis-cli
// chooses which master each replica follows), and waits until WaitHealthy
// holds. On error the started nodes are closed.
func StartCluster(ctx context.Context, cfg ClusterConfig) (*Cluster, error) {
	if cfg.Masters == 0 {
		cfg.Masters = DefaultMasters
	}
	switch cfg.Replicas {
	case 0:
		cfg.Replicas = DefaultReplicas
	case NoReplicas:
		cfg.Replicas = 0
	}
	if cfg.NodeTimeout == 0 {
		cfg.NodeTimeout = DefaultNodeTimeout
	}
	if cfg.Masters < 3 || cfg.Replicas < 0 || cfg.NodeTimeout < 0 {
		return nil, fmt.Errorf("redisproc: invalid cluster of %d masters with %d replicas each (node timeout %v)", cfg.Masters, cfg.Replicas, cfg.NodeTimeout)
	}
	if cfg.CLI == "" {
		cli, err := LookPath("redis-cli")
		if err != nil {
			return nil, err
		}
		cfg.CLI = cli
	}
	c := &Cluster{cfg: cfg}
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()
	args := append([]string{
		"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", strconv.FormatInt(cfg.NodeTimeout.Milliseconds(), 10),
		"--cluster-allow-replica-migration", "no", "--cluster-replica-validity-factor", "0",
	}, cfg.Args...)
	var addrs []string
	for range cfg.Masters * (1 + cfg.Replicas) {
		s, err := Start(Config{Bin: cfg.Bin, ClusterBus: true, LogLevel: clusterLogLevel, Args: args})
		if err != nil {
			return nil, err
		}
		n := &Node{Server: s}
		c.nodes = append(c.nodes, n)
		id, err := doString(ctx, s, "CLUSTER", "MYID")
		if err != nil {
			return nil, fmt.Errorf("redisproc: CLUSTER MYID on %s: %w", s.Addr(), err)
		}
		n.ID = id
		addrs = append(addrs, s.Addr())
	}
	create := append([]string{"--cluster", "create"}, addrs...)
	create = append(create, "--cluster-replicas", strconv.Itoa(cfg.Replicas), "--cluster-yes")
	cmd := exec.CommandContext(ctx, cfg.CLI, create...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := lifeline.Start(cmd)
	if err == nil {
		err = cmd.Wait()
	}
	if err != nil {
		return nil, fmt.Errorf("redisproc: redis-cli --cluster create: %w: %s", err, strings.TrimSpace(out.String()))
	}
	if err := c.WaitHealthy(ctx); err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

// Nodes returns every node, masters and replicas, in start order.
func (c *Cluster) Nodes() []*Node { return slices.Clone(c.nodes) }

// Addrs returns the addresses of every node (seeds for a cluster client).
func (c *Cluster) Addrs() []string {
	var addrs []string
	for _, n := range c.nodes {
		addrs = append(addrs, n.Addr())
	}
	return addrs
}

// Client returns a client of the cluster, seeded with every node, with
// one-second dial, read and write timeouts unless fn (may be nil) changes
// the options. The caller closes it.
func (c *Cluster) Client(fn func(*redis.ClusterOptions)) *redis.ClusterClient {
	o := &redis.ClusterOptions{Addrs: c.Addrs(), DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second}
	if fn != nil {
		fn(o)
	}
	return redis.NewClusterClient(o)
}

// Close kills every node and removes their directories.
func (c *Cluster) Close() {
	for _, n := range c.nodes {
		n.Close()
	}
}

func (c *Cluster) servers() []*Server {
	var s []*Server
	for _, n := range c.nodes {
		s = append(s, n.Server)
	}
	return s
}

func (c *Cluster) node(id string) *Node {
	for _, n := range c.nodes {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// Slot returns the hash slot of key, as the cluster computes it.
func (c *Cluster) Slot(ctx context.Context, key string) (int, error) {
	for _, n := range c.nodes {
		if !n.Running() {
			continue
		}
		v, err := do(ctx, n.Server, "CLUSTER", "KEYSLOT", key)
		if err != nil {
			return 0, err
		}
		slot, ok := v.(int64)
		if !ok {
			return 0, fmt.Errorf("redisproc: CLUSTER KEYSLOT reply %T", v)
		}
		return int(slot), nil
	}
	return 0, errors.New("redisproc: no cluster node is running")
}

// MasterOf returns the master that owns slot, as the running nodes agree
// (an error if they do not).
func (c *Cluster) MasterOf(ctx context.Context, slot int) (*Node, error) {
	views, err := c.views(ctx)
	if err != nil {
		return nil, err
	}
	var owner string
	for _, v := range views {
		id := v.owner(slot)
		if owner != "" && id != owner {
			return nil, fmt.Errorf("redisproc: the nodes disagree on the owner of slot %d (%s says %s, another %s)", slot, v.addr, id, owner)
		}
		owner = id
	}
	if n := c.node(owner); n != nil {
		return n, nil
	}
	return nil, fmt.Errorf("redisproc: slot %d has no known owner (%q)", slot, owner)
}

// MasterOfKey returns the master that owns key's slot.
func (c *Cluster) MasterOfKey(ctx context.Context, key string) (*Node, error) {
	slot, err := c.Slot(ctx, key)
	if err != nil {
		return nil, err
	}
	return c.MasterOf(ctx, slot)
}

// Masters returns the masters that own slots, as the running nodes agree.
func (c *Cluster) Masters(ctx context.Context) ([]*Node, error) {
	v, err := c.agreedView(ctx)
	if err != nil {
		return nil, err
	}
	var ms []*Node
	for _, e := range v.entries {
		if e.master() && len(e.slots) > 0 {
			if n := c.node(e.id); n != nil {
				ms = append(ms, n)
			}
		}
	}
	return ms, nil
}

// ReplicasOf returns the running nodes that replicate master, each by its
// own account.
func (c *Cluster) ReplicasOf(ctx context.Context, master *Node) ([]*Node, error) {
	vs, err := c.views(ctx)
	if err != nil {
		return nil, err
	}
	var rs []*Node
	for _, v := range vs {
		if me := v.myself(); me != nil && !me.master() && me.masterID == master.ID {
			if n := c.node(me.id); n != nil {
				rs = append(rs, n)
			}
		}
	}
	return rs, nil
}

// WaitHealthy waits until every node runs and agrees on one configuration
// (slots, roles, no node flagged failing), the cluster state is ok with
// every slot served, and every replica is connected to its master and in
// sync with it (equal replication offsets).
func (c *Cluster) WaitHealthy(ctx context.Context) error {
	c.announce(ctx)
	err := poll(ctx, "cluster healthy", func(ctx context.Context) (bool, string) {
		for _, n := range c.nodes {
			if !n.Running() {
				return false, n.Addr() + " is not running"
			}
		}
		if why := c.stateOK(ctx); why != "" {
			return false, why
		}
		vs, err := c.views(ctx)
		if err != nil {
			return false, err.Error()
		}
		for _, v := range vs {
			for _, e := range v.entries {
				if e.flagged() {
					return false, fmt.Sprintf("%s flags %s %s (%s)", v.addr, e.addr, e.flags, e.link)
				}
			}
		}
		if _, err := c.agreedView(ctx); err != nil {
			return false, err.Error()
		}
		for _, v := range vs {
			if v.roles() != vs[0].roles() {
				return false, fmt.Sprintf("%s and %s disagree on the nodes' roles", vs[0].addr, v.addr)
			}
			if len(v.entries) != len(c.nodes) {
				return false, fmt.Sprintf("%s knows %d nodes, want %d", v.addr, len(v.entries), len(c.nodes))
			}
			me := v.myself()
			if me == nil || me.master() {
				continue
			}
			replica, master := c.node(me.id), c.node(me.masterID)
			if replica == nil || master == nil {
				return false, "unknown node in " + me.line
			}
			if why := inSync(ctx, replica.Server, master.Server); why != "" {
				return false, why
			}
		}
		return true, ""
	})
	if err != nil {
		return fmt.Errorf("%w%s", err, logs(c.servers()))
	}
	return nil
}

// announce makes every running node send its state (role, master, slots)
// to every other at once, with a CLUSTER MEET of nodes it already knows:
// without it, a node that changed role (a replica assigned, a demoted
// master) tells a peer only at its next ping to it, up to half the node
// timeout later. Errors are left to the wait that follows.
func (c *Cluster) announce(ctx context.Context) {
	for _, n := range c.nodes {
		for _, m := range c.nodes {
			if n != m && n.Running() && m.Running() {
				_, _ = do(ctx, n.Server, "CLUSTER", "MEET", "127.0.0.1", m.Port(), m.BusPort())
			}
		}
	}
}

// stateOK returns why not every running node reports cluster_state:ok
// with every slot served, or "".
func (c *Cluster) stateOK(ctx context.Context) string {
	for _, n := range c.nodes {
		if !n.Running() {
			continue
		}
		info, err := doString(ctx, n.Server, "CLUSTER", "INFO")
		if err != nil {
			return fmt.Sprintf("CLUSTER INFO on %s: %v", n.Addr(), err)
		}
		if s := infoField(info, "cluster_state"); s != "ok" {
			return fmt.Sprintf("%s: cluster_state:%s", n.Addr(), s)
		}
		if s := infoField(info, "cluster_slots_ok"); s != strconv.Itoa(slots) {
			return fmt.Sprintf("%s: cluster_slots_ok:%s", n.Addr(), s)
		}
	}
	return ""
}

// inSync returns why replica is not connected to master and caught up
// with it, or "".
func inSync(ctx context.Context, replica, master *Server) string {
	ri, err := doString(ctx, replica, "INFO", "replication")
	if err != nil {
		return fmt.Sprintf("INFO on %s: %v", replica.Addr(), err)
	}
	mi, err := doString(ctx, master, "INFO", "replication")
	if err != nil {
		return fmt.Sprintf("INFO on %s: %v", master.Addr(), err)
	}
	switch {
	case infoField(ri, "role") != "slave":
		return replica.Addr() + " is not a replica"
	case infoField(ri, "master_port") != strconv.Itoa(master.Port()):
		return fmt.Sprintf("%s replicates port %s, want %d", replica.Addr(), infoField(ri, "master_port"), master.Port())
	case infoField(ri, "master_link_status") != "up":
		return replica.Addr() + ": master link down"
	case infoField(ri, "master_sync_in_progress") != "0":
		return replica.Addr() + ": sync in progress"
	case infoField(ri, "slave_repl_offset") != infoField(mi, "master_repl_offset"):
		return fmt.Sprintf("%s at offset %s, its master at %s", replica.Addr(), infoField(ri, "slave_repl_offset"), infoField(mi, "master_repl_offset"))
	}
	return ""
}

// FailoverMode is the option of CLUSTER FAILOVER.
type FailoverMode string

// Failover modes.
const (
	// FailoverCoordinated is a manual failover: the master stops its
	// clients until the replica has caught up, then the replica takes
	// over with the cluster's vote. No acknowledged write is lost.
	FailoverCoordinated FailoverMode = ""
	// FailoverForce does not wait for the master (it may be down); the
	// replica still needs the vote of a majority of masters.
	FailoverForce FailoverMode = "FORCE"
	// FailoverTakeover needs neither the master nor a vote: the replica
	// claims its master's slots with a new epoch at once.
	FailoverTakeover FailoverMode = "TAKEOVER"
)

// Failover makes replica take over its master's slots (CLUSTER FAILOVER
// with mode) and waits until every running node sees it as the master of
// those slots with the cluster state ok. If every node is running it then
// waits for WaitHealthy: the old master is a replica in sync with the new.
func (c *Cluster) Failover(ctx context.Context, replica *Node, mode FailoverMode) error {
	args := []any{"CLUSTER", "FAILOVER"}
	if mode != FailoverCoordinated {
		args = append(args, string(mode))
	}
	if _, err := do(ctx, replica.Server, args...); err != nil {
		return fmt.Errorf("redisproc: CLUSTER FAILOVER %s on %s: %w", mode, replica.Addr(), err)
	}
	err := poll(ctx, "failover to "+replica.Addr(), func(ctx context.Context) (bool, string) {
		views, err := c.views(ctx)
		if err != nil {
			return false, err.Error()
		}
		for _, v := range views {
			e := v.entry(replica.ID)
			if e == nil || !e.master() || len(e.slots) == 0 {
				return false, v.addr + " does not see the replica as a master with slots yet"
			}
		}
		if why := c.stateOK(ctx); why != "" {
			return false, why
		}
		return true, ""
	})
	if err != nil {
		return fmt.Errorf("%w%s", err, logs(c.servers()))
	}
	for _, n := range c.nodes {
		if !n.Running() {
			return nil
		}
	}
	return c.WaitHealthy(ctx)
}
