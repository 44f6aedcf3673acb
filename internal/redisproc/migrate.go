package redisproc

import (
	"context"
	"fmt"
)

// Migration is a slot being moved from one master to another: begun
// (MIGRATING on the source, IMPORTING on the target), its keys moved, and
// finished (the target owns the slot). Between Begin and Finish, Redis
// answers commands on the slot's keys with ASK (a key already moved) or
// TRYAGAIN (a command with several keys, some moved or missing).
type Migration struct {
	c        *Cluster
	Slot     int
	From, To *Node
}

// BeginMigration marks slot as importing on to and migrating on its owner.
func (c *Cluster) BeginMigration(ctx context.Context, slot int, to *Node) (*Migration, error) {
	from, err := c.MasterOf(ctx, slot)
	if err != nil {
		return nil, err
	}
	if from == to {
		return nil, fmt.Errorf("redisproc: slot %d is already on %s", slot, to.Addr())
	}
	if _, err := do(ctx, to.Server, "CLUSTER", "SETSLOT", slot, "IMPORTING", from.ID); err != nil {
		return nil, fmt.Errorf("redisproc: SETSLOT IMPORTING on %s: %w", to.Addr(), err)
	}
	if _, err := do(ctx, from.Server, "CLUSTER", "SETSLOT", slot, "MIGRATING", to.ID); err != nil {
		return nil, fmt.Errorf("redisproc: SETSLOT MIGRATING on %s: %w", from.Addr(), err)
	}
	return &Migration{c: c, Slot: slot, From: from, To: to}, nil
}

// MoveKeys moves every key of the slot to the target (MIGRATE, keeping
// their TTLs).
func (m *Migration) MoveKeys(ctx context.Context) error {
	for {
		v, err := do(ctx, m.From.Server, "CLUSTER", "GETKEYSINSLOT", m.Slot, 100)
		if err != nil {
			return fmt.Errorf("redisproc: GETKEYSINSLOT on %s: %w", m.From.Addr(), err)
		}
		keys, _ := v.([]any)
		if len(keys) == 0 {
			return nil
		}
		args := []any{"MIGRATE", "127.0.0.1", m.To.Port(), "", 0, 5000, "KEYS"}
		if _, err := do(ctx, m.From.Server, append(args, keys...)...); err != nil {
			return fmt.Errorf("redisproc: MIGRATE from %s to %s: %w", m.From.Addr(), m.To.Addr(), err)
		}
	}
}

// Finish assigns the slot to the target on the target, the source and the
// other masters, and waits until every running node agrees that the target
// owns it and the cluster state is ok.
func (m *Migration) Finish(ctx context.Context) error {
	masters, err := m.c.Masters(ctx)
	if err != nil {
		return err
	}
	order := []*Node{m.To, m.From}
	for _, n := range masters {
		if n != m.To && n != m.From {
			order = append(order, n)
		}
	}
	for _, n := range order {
		if _, err := do(ctx, n.Server, "CLUSTER", "SETSLOT", m.Slot, "NODE", m.To.ID); err != nil {
			return fmt.Errorf("redisproc: SETSLOT NODE on %s: %w", n.Addr(), err)
		}
	}
	err = poll(ctx, fmt.Sprintf("slot %d on %s", m.Slot, m.To.Addr()), func(ctx context.Context) (bool, string) {
		views, err := m.c.views(ctx)
		if err != nil {
			return false, err.Error()
		}
		for _, v := range views {
			if id := v.owner(m.Slot); id != m.To.ID {
				return false, fmt.Sprintf("%s says slot %d is on %s", v.addr, m.Slot, id)
			}
			if e := v.entry(v.self); e != nil && len(e.migrating) > 0 {
				return false, v.addr + " still has a slot migrating or importing"
			}
		}
		if why := m.c.stateOK(ctx); why != "" {
			return false, why
		}
		return true, ""
	})
	if err != nil {
		return fmt.Errorf("%w%s", err, logs(m.c.servers()))
	}
	return nil
}

// MigrateSlot moves slot and its keys to the master to: Begin, MoveKeys,
// Finish.
func (c *Cluster) MigrateSlot(ctx context.Context, slot int, to *Node) error {
	m, err := c.BeginMigration(ctx, slot, to)
	if err != nil {
		return err
	}
	if err := m.MoveKeys(ctx); err != nil {
		return err
	}
	return m.Finish(ctx)
}
