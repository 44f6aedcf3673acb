package redistest

import (
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock/scripts"
)

// batchSHA is batch_refresh.lua's SHA1, as EVALSHA names it.
var batchSHA = redis.NewScript(scripts.BatchRefresh.Source()).Hash()

// BatchRefreshKeys reports whether cmd runs batch_refresh.lua (by EVALSHA,
// or EVAL after a script flush), and how many keys it renews; for the
// go-redis hooks of tests and benchmarks that count renewal calls.
func BatchRefreshKeys(cmd redis.Cmder) (keys int, ok bool) {
	args := cmd.Args()
	if len(args) < 3 || !strings.EqualFold(fmt.Sprint(args[0]), "evalsha") && !strings.EqualFold(fmt.Sprint(args[0]), "eval") {
		return 0, false
	}
	if s := fmt.Sprint(args[1]); s != batchSHA && s != scripts.BatchRefresh.Source() {
		return 0, false
	}
	n, _ := args[2].(int)
	return n, true
}
