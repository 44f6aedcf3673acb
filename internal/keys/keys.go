// Package keys names the Redis keys of a lock and computes Redis Cluster
// hash slots. Every key of one lock shares the hash tag "{<key>}", so they
// all live in one slot.
package keys

import "strings"

// Lock is the set of Redis keys of one lock.
type Lock struct {
	Lock  string // the lock: "token:fence[:holder;][*]" with the lease's TTL
	Fence string // the fence counter
	Rel   string // the tokens of recent releases (release.lua)
	Wake  string // the pub/sub channel on which a release announces itself
	Queue string // fair mode: waiters' tickets by arrival
	QExp  string // fair mode: each queue entry's deadline

	// The KEYS of the scripts, as slices of one array so that passing them
	// allocates nothing: obtain takes {Lock, Fence} and, for a handoff,
	// Rel; release takes {Lock, Rel, Wake, Queue}.
	Obtain  [3]string
	Release [4]string
}

// tagEscaper makes any key a valid hash-tag body: Redis ends a tag at the
// first '}', so '}' (and the escape character itself) are percent-encoded.
// The mapping is injective, so distinct keys never share Redis keys.
var tagEscaper = strings.NewReplacer("%", "%25", "}", "%7D")

// suffixes name the helper keys: fence counter, released tokens, wake
// channel, fair queue, fair queue deadlines.
var suffixes = [...]string{":fence", ":rel", ":wake", ":queue", ":qexp"}

// Tagged is prefix + "{" + the escaped key + "}": the lock key itself, and
// the stem of its helper keys.
func Tagged(prefix, key string) string {
	return prefix + "{" + tagEscaper.Replace(key) + "}"
}

// New returns the keys of the lock on key under prefix. All of them are
// slices of one string, so it allocates once (plus the escaping, when the
// key holds '%' or '}').
func New(prefix, key string) Lock {
	tag := tagEscaper.Replace(key)
	n := len(prefix) + len(tag) + 2
	size := 0
	for _, s := range suffixes {
		size += n + len(s)
	}
	var b strings.Builder
	b.Grow(size)
	var names [len(suffixes)]string
	for i, suffix := range suffixes {
		start := b.Len()
		b.WriteString(prefix)
		b.WriteByte('{')
		b.WriteString(tag)
		b.WriteByte('}')
		b.WriteString(suffix)
		names[i] = b.String()[start:] // a Builder never changes bytes it has written
	}
	k := Lock{Lock: names[0][:n], Fence: names[0], Rel: names[1], Wake: names[2], Queue: names[3], QExp: names[4]}
	k.Obtain = [3]string{k.Lock, k.Fence, k.Rel}
	k.Release = [4]string{k.Lock, k.Rel, k.Wake, k.Queue}
	return k
}

// FairObtain is the KEYS of fair_obtain.lua: {Lock, Fence, Queue, QExp}.
func (k Lock) FairObtain() []string { return []string{k.Lock, k.Fence, k.Queue, k.QExp} }

// FairLeave is the KEYS of fair_leave.lua: {Lock, Wake, Queue, QExp}.
func (k Lock) FairLeave() []string { return []string{k.Lock, k.Wake, k.Queue, k.QExp} }

// Record is the Redis key of the fenced record of key (lease.Store).
func Record(prefix, key string) string { return Tagged(prefix, key) + ":rec" }

// Slot is the Redis Cluster hash slot of a key: CRC16 (XMODEM) of its hash
// tag, or of the whole key when it has none, modulo 16384.
func Slot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % 16384
}
