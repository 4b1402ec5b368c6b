package flightclient

// SetCapHook installs a function called each time a stream stops taking frames because its
// unacknowledged bytes reached the cap, with the number of frames on the wire and their bytes. It
// returns a function that removes it. Not for concurrent Loads.
func SetCapHook(h func(stream, frames int, bytes int64)) (restore func()) {
	capHook = h
	return func() { capHook = nil }
}
