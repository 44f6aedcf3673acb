package redislock

import "strings"

// keys are the Redis keys of one lock. All share the hash tag "{<key>}", so
// they live in one Redis Cluster slot.
type keys struct {
	lock  string // "token:fence" with the lease TTL
	fence string // the per-key fence counter
	wake  string // pub/sub channel: a release publishes here (wait.go)
	queue string // fair mode: waiters in arrival order (fair.go)
	qexp  string // fair mode: each waiter's queue-entry deadline (fair.go)
}

// tagEscaper makes any key a valid hash-tag body: Redis ends a tag at the
// first '}', so '}' (and the escape character itself) are percent-encoded.
// The mapping is injective, so distinct keys never share Redis keys.
var tagEscaper = strings.NewReplacer("%", "%25", "}", "%7D")

func makeKeys(prefix, key string) keys {
	lock := prefix + "{" + tagEscaper.Replace(key) + "}"
	return keys{lock: lock, fence: lock + ":fence", wake: lock + ":wake",
		queue: lock + ":queue", qexp: lock + ":qexp"}
}
