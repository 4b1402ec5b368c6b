package schemamatch

// WithSlowCasts makes Apply take the general path of every cast that has a fast one, so tests can
// check the fast paths against it.
func WithSlowCasts() Option { return func(c *config) { c.slowCasts = true } }
