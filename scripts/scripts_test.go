package scripts

import (
	"io/fs"
	"strings"
	"testing"
)

var all = []Script{Obtain, Propose, RecordPrelude, Refresh, Release, TTL, Inspect, Join, FairObtain, FairLeave,
	MultiObtain, MultiRefresh, MultiRelease, MultiTTL, FencedSet, RecordGet, RecordDelete, BatchRefresh, FencePrelude,
	SemaphorePrelude, SemaphoreAcquire, SemaphoreRefresh, SemaphoreRelease, SemaphoreTTL, SemaphoreInspect}

// Every script has a source with a header, and every file is a Script.
func TestSources(t *testing.T) {
	t.Parallel()
	named := map[string]bool{}
	for _, s := range all {
		src := s.Source()
		if !strings.HasPrefix(src, "--") {
			t.Errorf("%s: source does not start with its header comment: %.40q", s, src)
		}
		named[string(s)] = true
	}
	files, err := fs.Glob(files, "*.lua")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !named[f] {
			t.Errorf("%s is no Script constant", f)
		}
	}
	if src := Script("missing.lua").Source(); src != "" {
		t.Errorf("Source of a missing file = %q, want empty", src)
	}
}
