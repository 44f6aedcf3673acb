package keep

import "time"

// Keeper renews one lock's lease itself: see lease/backend.Keeper.
type Keeper interface {
	Keep(ttl, interval time.Duration, lost func(cause error)) (stop func())
}

// Hook is embedded, through lease/backend.Keeping, in the Lock type of a
// backend that renews its leases itself. Its one method is unexported, so
// the Lock's own method set shows nothing of it.
type Hook struct{ k Keeper }

// NewHook returns the Hook of a Lock renewed by k.
func NewHook(k Keeper) Hook { return Hook{k} }

func (h Hook) keeper() Keeper { return h.k }

// hooked is a Lock that embeds a Hook.
type hooked interface{ keeper() Keeper }

// Now is the time on the clock of l's ValidUntil: its Keeper's Now, if it
// has one (a backend on a clock of its own), else the real time.
func Now(l any) time.Time {
	if c, ok := Of(l).(interface{ Now() time.Time }); ok {
		return c.Now()
	}
	return time.Now()
}

// Of returns the Keeper of l, nil when its backend does not renew it
// itself.
func Of(l any) Keeper {
	if h, ok := l.(hooked); ok {
		return h.keeper()
	}
	return nil
}
