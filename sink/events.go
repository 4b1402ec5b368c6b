package sink

import (
	"time"

	"github.com/loaderproject/loader/tableschema"
)

// Events are callbacks the sink makes as it works, for metrics. Any of them may be nil. They run on
// the sink's goroutines (a stream's, a table's log writer or committer), so they must be quick.
type Events struct {
	// Durable is called when rows of a table are on disk (written and fsync'd to its log), and so
	// acknowledged or about to be: rows and the frame's bytes (Zerobus and plain Flight DoPuts).
	Durable func(table tableschema.TableName, rows, bytes int64)
	// Committed is called after each Delta commit of a table, with the rows it took and how long
	// it took.
	Committed func(table tableschema.TableName, rows int64, d time.Duration)
	// WALSync is called with the duration of each group commit's fsync of a table's log.
	WALSync func(table tableschema.TableName, d time.Duration)
	// StreamOpened and StreamClosed bracket every DoPut.
	StreamOpened, StreamClosed func()
}

// WithEvents sets callbacks the sink makes as it works (see Events). Default: none.
func WithEvents(e Events) Option {
	return func(c *config) { c.events = e }
}

func (e *Events) durable(t tableschema.TableName, rows, bytes int64) {
	if e.Durable != nil {
		e.Durable(t, rows, bytes)
	}
}

func (e *Events) committed(t tableschema.TableName, rows int64, d time.Duration) {
	if e.Committed != nil {
		e.Committed(t, rows, d)
	}
}

func (e *Events) walSync(t tableschema.TableName) func(time.Duration) {
	if e.WALSync == nil {
		return nil
	}
	return func(d time.Duration) { e.WALSync(t, d) }
}

func (e *Events) streamOpened() {
	if e.StreamOpened != nil {
		e.StreamOpened()
	}
}

func (e *Events) streamClosed() {
	if e.StreamClosed != nil {
		e.StreamClosed()
	}
}
