package lifeline

// DisablePdeathsig makes Start and StartWatched set no Pdeathsig, for a
// test that proves the lifeline alone.
func DisablePdeathsig() { pdeathsig = false }
