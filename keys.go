package redislock

import "strings"

// keys are the Redis keys of one lock. All share the hash tag "{<key>}", so
// they live in one Redis Cluster slot.
type keys struct {
	lock  string // "token:fence" with the lease TTL
	fence string // the per-key fence counter
	// The KEYS of the scripts: obtain takes {lock, fence} and, for a
	// handoff, rel; release {lock, rel, wake, queue}; the others obtain[:1].
	obtain  [3]string
	release [4]string
}

// tagEscaper makes any key a valid hash-tag body: Redis ends a tag at the
// first '}', so '}' (and the escape character itself) are percent-encoded.
// The mapping is injective, so distinct keys never share Redis keys.
var tagEscaper = strings.NewReplacer("%", "%25", "}", "%7D")

// keySuffixes name the helper keys: the fence counter, the released tokens
// (release.lua), the wake channel and the fair-mode queue.
var keySuffixes = [...]string{":fence", ":rel", ":wake", ":queue"}

func makeKeys(prefix, key string) keys {
	// All names are slices of one string "L:fenceL:relL:wakeL:queue", where
	// L = prefix{tag}: one allocation.
	tag := tagEscaper.Replace(key)
	n := len(prefix) + len(tag) + 2
	var b strings.Builder
	b.Grow(4*n + len(":fence:rel:wake:queue"))
	var names [len(keySuffixes)]string
	for i, suffix := range keySuffixes {
		start := b.Len()
		b.WriteString(prefix)
		b.WriteByte('{')
		b.WriteString(tag)
		b.WriteByte('}')
		b.WriteString(suffix)
		names[i] = b.String()[start:] // a Builder never changes bytes it has written
	}
	lock := names[0][:n]
	fence, rel, wake, queue := names[0], names[1], names[2], names[3]
	return keys{lock: lock, fence: fence, obtain: [3]string{lock, fence, rel}, release: [4]string{lock, rel, wake, queue}}
}

// Helper keys of a lock, in its hash slot.

// wake is the pub/sub channel on which a release announces itself (wait.go).
func (k keys) wake() string { return k.release[2] }

// queue is the fair-mode queue: waiters' tickets by arrival (fair.go).
func (k keys) queue() string { return k.release[3] }

// qexp holds the deadline of each fair-mode queue entry (fair.go).
func (k keys) qexp() string { return k.lock + ":qexp" }
