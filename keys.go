package redislock

import "strings"

// keys are the Redis keys of one lock. All share the hash tag "{<key>}", so
// they live in one Redis Cluster slot.
type keys struct {
	lock  string // "token:fence" with the lease TTL
	fence string // the per-key fence counter
}

// tagEscaper makes any key a valid hash-tag body: Redis ends a tag at the
// first '}', so '}' (and the escape character itself) are percent-encoded.
// The mapping is injective, so distinct keys never share Redis keys.
var tagEscaper = strings.NewReplacer("%", "%25", "}", "%7D")

func makeKeys(prefix, key string) keys {
	lock := prefix + "{" + tagEscaper.Replace(key) + "}"
	return keys{lock: lock, fence: lock + ":fence"}
}

// Helper keys of a lock, in its hash slot.

// wake is the pub/sub channel on which a release announces itself (wait.go).
func (k keys) wake() string { return k.lock + ":wake" }

// queue is the fair-mode queue: waiters' tickets by arrival (fair.go).
func (k keys) queue() string { return k.lock + ":queue" }

// qexp holds the deadline of each fair-mode queue entry (fair.go).
func (k keys) qexp() string { return k.lock + ":qexp" }
