package databricks

import "time"

// SetClock makes t read the time from now (tests).
func (t *Tokens) SetClock(now func() time.Time) { t.now = now }
