package redislock

import "strings"

// keys are the Redis keys of one lock. All share the hash tag "{<key>}", so
// they live in one Redis Cluster slot.
type keys struct {
	lock  string    // "token:fence" with the lease TTL
	fence string    // the per-key fence counter
	both  [2]string // {lock, fence}: KEYS for obtain; both[:1] for the others
}

// tagEscaper makes any key a valid hash-tag body: Redis ends a tag at the
// first '}', so '}' (and the escape character itself) are percent-encoded.
// The mapping is injective, so distinct keys never share Redis keys.
var tagEscaper = strings.NewReplacer("%", "%25", "}", "%7D")

func makeKeys(prefix, key string) keys {
	fence := prefix + "{" + tagEscaper.Replace(key) + "}:fence"
	lock := fence[:len(fence)-len(":fence")]
	return keys{lock: lock, fence: fence, both: [2]string{lock, fence}}
}
