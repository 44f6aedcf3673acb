// Package scripts holds redislock's Lua scripts, one per operation. Each
// file starts with a header that names its KEYS, its ARGV and every reply;
// together they are the server side of the locks. The library loads them
// from here (internal/script runs them); read them for how the locks work.
package scripts

import _ "embed"

// The scripts of single-key locks.
var (
	//go:embed obtain.lua
	Obtain string
	//go:embed refresh.lua
	Refresh string
	//go:embed release.lua
	Release string
	//go:embed ttl.lua
	TTL string
	//go:embed inspect.lua
	Inspect string
)

// The scripts of fair (FIFO) locks.
var (
	//go:embed fair_obtain.lua
	FairObtain string
	//go:embed fair_leave.lua
	FairLeave string
)

// The scripts of multi-key locks.
var (
	//go:embed multi_obtain.lua
	MultiObtain string
	//go:embed multi_refresh.lua
	MultiRefresh string
	//go:embed multi_release.lua
	MultiRelease string
	//go:embed multi_ttl.lua
	MultiTTL string
)

// The scripts of fenced records (FencedSet, Client.Store).
var (
	//go:embed fenced_set.lua
	FencedSet string
	//go:embed record_get.lua
	RecordGet string
	//go:embed record_delete.lua
	RecordDelete string
)

// The script of batched renewal (internal/renew): refresh.lua for the
// locks of one slot at once.
var (
	//go:embed batch_refresh.lua
	BatchRefresh string
)
