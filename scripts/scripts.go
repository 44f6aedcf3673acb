// Package scripts holds redislock's Lua scripts, one per operation. Each
// file starts with a header that names its KEYS, its ARGV and every reply;
// together they are the server side of the locks. The library loads them
// from here (internal/script runs them); read them for how the locks work.
package scripts

import "embed"

//go:embed *.lua
var files embed.FS

// Script is one of the scripts, named by its file.
type Script string

// The scripts of single-key locks.
const (
	Obtain  Script = "obtain.lua"
	Refresh Script = "refresh.lua"
	Release Script = "release.lua"
	TTL     Script = "ttl.lua"
	Inspect Script = "inspect.lua"
)

// Join brings a quorum node into a grant it does not hold (quorum mode's
// refresh).
const Join Script = "join.lua"

// The scripts of fair (FIFO) locks.
const (
	FairObtain Script = "fair_obtain.lua"
	FairLeave  Script = "fair_leave.lua"
)

// The scripts of multi-key locks.
const (
	MultiObtain  Script = "multi_obtain.lua"
	MultiRefresh Script = "multi_refresh.lua"
	MultiRelease Script = "multi_release.lua"
	MultiTTL     Script = "multi_ttl.lua"
)

// The scripts of fenced records (FencedSet, Client.Store).
const (
	FencedSet    Script = "fenced_set.lua"
	RecordGet    Script = "record_get.lua"
	RecordDelete Script = "record_delete.lua"
)

// Propose is quorum mode's Obtain: the fence is the client's proposal.
const Propose Script = "propose.lua"

// The preludes: functions that scripts share, not scripts of their own.
// internal/script puts in front of each script (or on its line
// "-- record.lua" or "-- fence.lua") the functions it names.
const (
	// FencePrelude holds the fence functions (compare, check, reply,
	// increment as decimal strings; the clock's fence).
	FencePrelude Script = "fence.lua"
	// RecordPrelude holds the lock key's value format: a grant or a
	// released record, decoded and written only here.
	RecordPrelude Script = "record.lua"
)

// BatchRefresh is the script of batched renewal (internal/renew):
// refresh.lua for the locks of one slot at once.
const BatchRefresh Script = "batch_refresh.lua"

// Source returns the script's Lua source; "" for a Script that names no
// file of this package.
func (s Script) Source() string {
	b, err := files.ReadFile(string(s))
	if err != nil {
		return ""
	}
	return string(b)
}
