package main

import (
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The report and the usage line name the way this build is run again:
// built from the module cache (go run .../bench@VERSION, go install), by
// its module path and version; from a clone's work tree, go -C bench run .
func TestInvocation(t *testing.T) {
	const mod = "github.com/redislock-go/redislock/bench"
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"go run @version", &debug.BuildInfo{Main: debug.Module{Path: mod, Version: "v0.2.0", Sum: "h1:abc="}}, "go run " + mod + "@v0.2.0"},
		{"go -C bench run .", &debug.BuildInfo{Main: debug.Module{Path: mod, Version: "(devel)"}}, "go -C bench run ."},
		{"a clone stamped by its VCS", &debug.BuildInfo{Main: debug.Module{Path: mod, Version: "v0.2.1-0.20260101000000-abcdef012345+dirty"}}, "go -C bench run ."},
		{"no build information", nil, "go -C bench run ."},
	} {
		inv := invocation(tc.bi)
		assert.Equal(t, tc.want, inv.Command, "%s: command %q, want %q", tc.name, inv.Command, tc.want)
		usage := strings.Join(inv.Forms, "\n")
		assert.False(t, !strings.Contains(usage, "go run "+mod+"@") || !strings.Contains(usage, "go -C bench run ."), "%s: the usage line does not show both ways to run the tool: %q", tc.name, inv.Forms)
	}
}
