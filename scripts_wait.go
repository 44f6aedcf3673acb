package redislock

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// Scripts of multi-key locks (multi.go) and fair locks (fair.go).
var (
	//go:embed scripts/multi_obtain.lua
	multiObtainSrc    string
	multiObtainScript = redis.NewScript(multiObtainSrc)

	//go:embed scripts/multi_refresh.lua
	multiRefreshSrc    string
	multiRefreshScript = redis.NewScript(multiRefreshSrc)

	//go:embed scripts/multi_release.lua
	multiReleaseSrc    string
	multiReleaseScript = redis.NewScript(multiReleaseSrc)

	//go:embed scripts/multi_ttl.lua
	multiTTLSrc    string
	multiTTLScript = redis.NewScript(multiTTLSrc)
)

var (
	//go:embed scripts/fair_obtain.lua
	fairObtainSrc    string
	fairObtainScript = redis.NewScript(fairObtainSrc)

	//go:embed scripts/fair_leave.lua
	fairLeaveSrc    string
	fairLeaveScript = redis.NewScript(fairLeaveSrc)
)
