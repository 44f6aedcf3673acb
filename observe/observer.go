package observe

// An Observer receives events: any value that implements one or more of the
// event interfaces of this package (see the package doc).
type Observer any

// Select returns the observers of list that implement T, in list order, or
// nil when none does. An event source keeps one such slice per event
// interface, selected once, and skips an event whose slice is empty.
func Select[T any](list []Observer) []T {
	var out []T
	for _, o := range list {
		if x, ok := o.(T); ok {
			out = append(out, x)
		}
	}
	return out
}
