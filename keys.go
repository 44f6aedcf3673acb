package redislock

import "strings"

// keys are the Redis keys of one lock. All share the hash tag "{<key>}", so
// they live in one Redis Cluster slot.
type keys struct {
	lock  string // "token:fence" with the lease TTL
	fence string // the per-key fence counter
	// all are the KEYS of the scripts: {lock, fence, wake, queue}; obtain
	// takes all[:2], release all of them, the others all[:1].
	all [4]string
}

// tagEscaper makes any key a valid hash-tag body: Redis ends a tag at the
// first '}', so '}' (and the escape character itself) are percent-encoded.
// The mapping is injective, so distinct keys never share Redis keys.
var tagEscaper = strings.NewReplacer("%", "%25", "}", "%7D")

func makeKeys(prefix, key string) keys {
	// All four names are slices of one string "L:fenceL:wakeL:queue", where
	// L = prefix{tag}: one allocation.
	tag := tagEscaper.Replace(key)
	n := len(prefix) + len(tag) + 2
	var b strings.Builder
	b.Grow(3*n + len(":fence:wake:queue"))
	for _, suffix := range [...]string{":fence", ":wake", ":queue"} {
		b.WriteString(prefix)
		b.WriteByte('{')
		b.WriteString(tag)
		b.WriteByte('}')
		b.WriteString(suffix)
	}
	names := b.String()
	lock, fence := names[:n], names[:n+6]
	wake, queue := names[n+6:2*n+11], names[2*n+11:]
	return keys{lock: lock, fence: fence, all: [4]string{lock, fence, wake, queue}}
}

// Helper keys of a lock, in its hash slot.

// wake is the pub/sub channel on which a release announces itself (wait.go).
func (k keys) wake() string { return k.all[2] }

// queue is the fair-mode queue: waiters' tickets by arrival (fair.go).
func (k keys) queue() string { return k.all[3] }

// qexp holds the deadline of each fair-mode queue entry (fair.go).
func (k keys) qexp() string { return k.lock + ":qexp" }
