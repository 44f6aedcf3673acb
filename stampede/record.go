package stampede

// Records in the Store: one kind byte, then the payload.
//
//	'v' value    the cached value; its record TTL is the TTL given to Do
//	'n' miss     negative caching (WithNegativeTTL): the fill's ErrMissing
//	             message, for the negative TTL
//	'm' missed   a miss that is not cached: as 'f'
//	'f' failure  the fill's error message, kept for the lock TTL so that
//	             callers waiting in other processes get the error
//	'p' panic    as 'f', for a fill that panicked
//
// Only a cold fill writes 'm', 'f' and 'p' records, never an early
// refresh: a failure never replaces a value.
const (
	kindValue   byte = 'v'
	kindMissing byte = 'n'
	kindMissed  byte = 'm'
	kindFailure byte = 'f'
	kindPanic   byte = 'p'
)

func encode(kind byte, payload []byte) []byte {
	b := make([]byte, 1+len(payload))
	b[0] = kind
	copy(b[1:], payload)
	return b
}

// decode splits a record; ok is false for a record this package did not
// write (it is then treated as absent and overwritten by the next fill).
func decode(b []byte) (kind byte, payload []byte, ok bool) {
	if len(b) == 0 {
		return 0, nil, false
	}
	switch b[0] {
	case kindValue, kindMissing, kindMissed, kindFailure, kindPanic:
		return b[0], b[1:], true
	}
	return 0, nil, false
}

// outcome is the error a failure or miss record stands for.
func outcome(key string, kind byte, payload []byte, fence int64) error {
	return &FillError{
		Key: key, Fence: fence, Message: string(payload),
		Missing:  kind == kindMissing || kind == kindMissed,
		Panicked: kind == kindPanic,
	}
}
