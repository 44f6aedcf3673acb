// Package keys names the Redis keys of a lock (and of a semaphore) and
// computes Redis Cluster hash slots. Every key of one lock shares the hash
// tag "{<key>}", so they all live in one slot.
//
// The names are unambiguous: two different (prefix, key) pairs never name
// one Redis key, nor do two kinds of name (of a lock or a semaphore) of
// one pair, for every prefix without '{' or '}' (the options refuse braces
// in a prefix). The prefix ends at the first '{'; the tag, whose '}' and
// '%' are percent-encoded, at the next '}'; a fixed suffix follows.
package keys

import "strings"

// Lock names one lock's Redis key and wake channel. A lock has one key of
// its own (its value: scripts/record.lua); fair mode adds its queue's two sorted
// sets, named on demand (Queue, QExp).
type Lock struct {
	Lock string // the lock key: a grant or a released record
	Wake string // the pub/sub channel on which a release announces itself

	// Boxed is {Lock}, the KEYS of the scripts of one lock, boxed once as
	// a script argument (an array: slicing it allocates nothing).
	Boxed [1]any
}

// tagEscaper makes any key a valid hash-tag body: Redis ends a tag at the
// first '}', so '}' (and the escape character itself) are percent-encoded.
// The mapping is injective, so distinct keys never share Redis keys.
var tagEscaper = strings.NewReplacer("%", "%25", "}", "%7D")

// Tagged is prefix + "{" + the escaped key + "}": the lock key itself, and
// the stem of its helper keys.
func Tagged(prefix, key string) string {
	return prefix + "{" + tagEscaper.Replace(key) + "}"
}

// wake is the suffix of the wake channel.
const wake = ":wake"

// New returns the names of the lock on key under prefix. The lock key is a
// prefix of the wake channel's name, so it allocates once (plus the
// escaping, when the key holds '%' or '}').
func New(prefix, key string) Lock {
	tag := key
	if strings.ContainsAny(key, "%}") {
		tag = tagEscaper.Replace(key)
	}
	n := len(prefix) + len(tag) + 2
	var b strings.Builder
	b.Grow(n + len(wake))
	b.WriteString(prefix)
	b.WriteByte('{')
	b.WriteString(tag)
	b.WriteByte('}')
	b.WriteString(wake)
	w := b.String()
	return Lock{Lock: w[:n], Wake: w, Boxed: [1]any{w[:n]}}
}

// Queue is fair mode's queue of waiters' tickets by arrival.
func (k Lock) Queue() string { return k.Lock + ":queue" }

// QExp is fair mode's queue entry deadlines.
func (k Lock) QExp() string { return k.Lock + ":qexp" }

// FairObtain is the KEYS of fair_obtain.lua: {Lock, Queue, QExp}.
func (k Lock) FairObtain() []string { return []string{k.Lock, k.Queue(), k.QExp()} }

// FairRelease is the KEYS of release.lua in fair mode: {Lock, Queue}.
func (k Lock) FairRelease() []string { return []string{k.Lock, k.Queue()} }

// FairLeave is the KEYS of fair_leave.lua: {Lock, Wake, Queue, QExp}.
func (k Lock) FairLeave() []string { return []string{k.Lock, k.Wake, k.Queue(), k.QExp()} }

// Record is the Redis key of the fenced record of key (lease.Store).
func Record(prefix, key string) string { return Tagged(prefix, key) + ":rec" }

// semaphore ends the tag of a semaphore's names: no name of a lock has it
// there, so a semaphore and a lock never share a key, whatever their
// prefixes and names.
const semaphore = ":sem"

// Semaphore names the keys of the semaphore name under prefix, the KEYS of
// the semaphore scripts (see scripts/semaphore_prelude.lua): its state
// hash, holders, queue, queue deadlines and fence counter; and its wake
// channel. They share the hash tag of a lock on name.
func Semaphore(prefix, name string) (ks []string, wake string) {
	base := Tagged(prefix, name) + semaphore
	return []string{base, base + ":holders", base + ":queue", base + ":qdead", base + ":fence"}, base + ":wake"
}

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
