package redistest

import (
	"os"
	"strings"
)

// FIPSOnly reports whether the process runs under GODEBUG=fips140=only,
// where SHA-1 and MD5 panic: miniredis, which names scripts by a SHA-1 of
// its own, cannot run them then, so tests use real servers alone.
func FIPSOnly() bool {
	mode := ""
	for _, s := range strings.Split(os.Getenv("GODEBUG"), ",") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(s), "fips140="); ok {
			mode = v // the last setting wins, as for the runtime
		}
	}
	return mode == "only"
}
