package lease

import "strings"

// keySeparator ends the prefix in a key made by Key.
const keySeparator = "|"

// keyEscaper percent-encodes the bytes of a prefix that Key gives a
// meaning: the separator and the escape byte itself.
var keyEscaper = strings.NewReplacer("%", "%25", "|", "%7C")

// Key returns the key of id in the namespace prefix, for code that keeps
// several kinds of locks and records on one Locker and Store (the pattern
// packages make their keys with it): prefix, with every '%' and '|' in it
// percent-encoded, then '|', then id as it is. Two different (prefix, id)
// pairs never give one key, whatever bytes they hold: prefix "dedup:" and
// id "email:1" give "dedup:|email:1", prefix "dedup:email:" and id "1"
// give "dedup:email:|1".
func Key(prefix, id string) string {
	if strings.ContainsAny(prefix, "%|") {
		prefix = keyEscaper.Replace(prefix)
	}
	return prefix + keySeparator + id
}
