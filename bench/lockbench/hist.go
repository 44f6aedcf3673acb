package lockbench

import (
	"math"
	"math/bits"
	"sort"
	"time"
)

// hist is a log-linear latency histogram: 64 sub-buckets per power of two,
// so a reported percentile is within ~1.6% of the true value. Recording
// never allocates, which keeps the harness out of the allocs/op numbers.
type hist struct {
	counts [64 * 64]uint64
	n      uint64
	max    time.Duration
}

const subBits = 6 // 64 sub-buckets

func bucketOf(d time.Duration) int {
	v := uint64(d)
	if d < 0 {
		v = 0
	}
	if v < 1<<subBits {
		return int(v)
	}
	e := bits.Len64(v) - subBits // >= 1
	sub := (v >> uint(e-1)) & (1<<subBits - 1)
	i := e<<subBits | int(sub)
	if i >= len(hist{}.counts) {
		return len(hist{}.counts) - 1
	}
	return i
}

// lowerBound is the smallest duration that lands in bucket i.
func lowerBound(i int) time.Duration {
	if i < 1<<subBits {
		return time.Duration(i)
	}
	e := i >> subBits
	sub := uint64(i & (1<<subBits - 1))
	return time.Duration((1<<subBits | sub) << uint(e-1))
}

func (h *hist) record(d time.Duration) {
	h.counts[bucketOf(d)]++
	h.n++
	if d > h.max {
		h.max = d
	}
}

func (h *hist) merge(o *hist) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	if o.max > h.max {
		h.max = o.max
	}
}

// quantile returns the q-quantile (0 < q <= 1), midpoint of its bucket.
func (h *hist) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	if rank < 1 {
		rank = 1
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			lo, hi := lowerBound(i), lowerBound(i+1)
			mid := lo + (hi-lo)/2
			if mid > h.max {
				mid = h.max
			}
			return mid
		}
	}
	return h.max
}

// Stat summarises one metric over the repetitions of a cell.
type Stat struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

func summarize(vals []float64) Stat {
	var v []float64
	for _, x := range vals {
		if !math.IsNaN(x) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return Stat{math.NaN(), math.NaN(), math.NaN()}
	}
	sort.Float64s(v)
	med := v[len(v)/2]
	if len(v)%2 == 0 {
		med = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return Stat{Median: med, Min: v[0], Max: v[len(v)-1]}
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// at is the q-quantile in µs, NaN when nothing was recorded (a metric
// left out of the medians rather than a 0).
func (h *hist) at(q float64) float64 {
	if h.n == 0 {
		return math.NaN()
	}
	return us(h.quantile(q))
}
