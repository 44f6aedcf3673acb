package redislock

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// Each script is sent with EVALSHA and falls back to EVAL on NOSCRIPT (after
// SCRIPT FLUSH or a restart), through redis.Script.Run.
var (
	//go:embed scripts/obtain.lua
	obtainSrc    string
	obtainScript = redis.NewScript(obtainSrc)

	//go:embed scripts/refresh.lua
	refreshSrc    string
	refreshScript = redis.NewScript(refreshSrc)

	//go:embed scripts/release.lua
	releaseSrc    string
	releaseScript = redis.NewScript(releaseSrc)

	//go:embed scripts/ttl.lua
	ttlSrc    string
	ttlScript = redis.NewScript(ttlSrc)

	//go:embed scripts/fenced_set.lua
	fencedSetSrc    string
	fencedSetScript = redis.NewScript(fencedSetSrc)
)
