package lockbench

import "testing"

// Strict mode fails on a renew lock found gone, and on expired leases only
// when half the held locks or more expired: a stalled machine lets a few
// short leases run out, a broken renewal lets them all.
func TestProblemsRenewLosses(t *testing.T) {
	renew := func(lost, expired float64) *Report {
		return &Report{Results: []*Result{{
			Scenario: Renew, Library: "redislock", Workers: 20, Nodes: 1,
			Samples: []map[string]float64{{}},
			Metrics: map[string]Stat{
				MRenewSent:   {Median: 100, Min: 100, Max: 100},
				MLost:        {Max: lost},
				MLostExpired: {Max: expired},
			},
		}}}
	}
	for _, c := range []struct {
		lost, expired float64
		problem       bool
	}{
		{0, 0, false},
		{0, 2, false}, // two short leases ran out on a loaded machine
		{0, 10, true}, // half of them: renewal does not work
		{1, 0, true},  // a lock found gone while held
	} {
		if got := len(Problems(renew(c.lost, c.expired))) > 0; got != c.problem {
			t.Errorf("lost %v, expired %v: problem %v, want %v (%q)", c.lost, c.expired, got, c.problem, Problems(renew(c.lost, c.expired)))
		}
	}
}
