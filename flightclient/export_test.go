package flightclient

// WithCapHook installs a function called each time a stream stops taking frames because its
// unacknowledged bytes reached the cap, with the number of frames on the wire and their bytes.
func WithCapHook(h func(stream, frames int, bytes int64)) Option {
	return func(c *config) { c.capHook = h }
}
