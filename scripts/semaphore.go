package scripts

// The scripts of package semaphore. SemaphorePrelude goes in front of each
// of the others (internal/script joins them): it names their keys and holds
// the functions they share.
const (
	SemaphorePrelude Script = "semaphore_prelude.lua"
	SemaphoreAcquire Script = "semaphore_acquire.lua"
	SemaphoreRefresh Script = "semaphore_refresh.lua"
	SemaphoreRelease Script = "semaphore_release.lua"
	SemaphoreTTL     Script = "semaphore_ttl.lua"
	SemaphoreInspect Script = "semaphore_inspect.lua"
)
