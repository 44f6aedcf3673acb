package sim

import "time"

// Rand is a small deterministic random source (splitmix64). Each stream
// of choices gets its own Rand, derived from the seed and the stream's
// names, so that one stream's draws never shift another's.
type Rand struct{ s uint64 }

// NewRand returns the stream of seed named by ids.
func NewRand(seed int64, ids ...uint64) *Rand {
	r := &Rand{s: uint64(seed)}
	for _, id := range ids {
		r.s ^= id * 0x9e3779b97f4a7c15
		r.Uint64()
	}
	return r
}

// Uint64 returns the next 64 random bits.
func (r *Rand) Uint64() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Intn returns a number in [0, n); 0 when n <= 0.
func (r *Rand) Intn(n int) int {
	if n <= 0 {
		return 0
	}
	return int(r.Uint64() % uint64(n))
}

// Float64 returns a number in [0, 1).
func (r *Rand) Float64() float64 { return float64(r.Uint64()>>11) / (1 << 53) }

// Chance reports true with probability p.
func (r *Rand) Chance(p float64) bool { return r.Float64() < p }

// Between returns a duration in [lo, hi].
func (r *Rand) Between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(r.Uint64()%uint64(hi-lo+1))
}
