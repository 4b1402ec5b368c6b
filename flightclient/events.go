package flightclient

import "time"

// Events are callbacks the client makes as it loads, for metrics and traces. Any of them may be nil.
// They run on the client's stream goroutines (AckLatency with the stream's lock held), so they must
// be quick and must not call back into the client.
type Events struct {
	// CallOpened is called when a stream opens a DoPut; reconnect says it is not the stream's
	// first (after a transient failure, a rotation, or a bounded call that ended).
	CallOpened func(stream int, reconnect bool)
	// CallClosed is called when that DoPut ends, however it ends.
	CallClosed func(stream int)
	// Retry is called when a stream is about to reopen after a transient failure.
	Retry func(stream int, err error)
	// AckLatency is called for each frame (or re-sliced part of one) when its last row is
	// acknowledged, with the time since it was sent.
	AckLatency func(d time.Duration)
}

// WithEvents sets callbacks the client makes as it loads (see Events). Default: none.
func WithEvents(e Events) Option {
	return func(c *config) { c.events = e }
}

func (e *Events) callOpened(stream int, reconnect bool) {
	if e.CallOpened != nil {
		e.CallOpened(stream, reconnect)
	}
}

func (e *Events) callClosed(stream int) {
	if e.CallClosed != nil {
		e.CallClosed(stream)
	}
}

func (e *Events) retry(stream int, err error) {
	if e.Retry != nil {
		e.Retry(stream, err)
	}
}

func (e *Events) ackLatency(d time.Duration) {
	if e.AckLatency != nil {
		e.AckLatency(d)
	}
}
