package scripts

import _ "embed"

// The scripts of package semaphore. SemaphorePrelude goes in front of each
// of the others (internal/script joins them): it names their keys and holds
// the functions they share.
var (
	//go:embed semaphore_prelude.lua
	SemaphorePrelude string
	//go:embed semaphore_acquire.lua
	SemaphoreAcquire string
	//go:embed semaphore_refresh.lua
	SemaphoreRefresh string
	//go:embed semaphore_release.lua
	SemaphoreRelease string
	//go:embed semaphore_ttl.lua
	SemaphoreTTL string
	//go:embed semaphore_inspect.lua
	SemaphoreInspect string
)
