package sink

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/loaderproject/loader/sink/internal/wal"
	"github.com/loaderproject/loader/warehouse"
)

// Exactly-once by unit id.
//
// A loader that called loader.unit-ids tags each data frame with the id of the source unit it comes
// from and the frame's row range in that unit (sinkapi.UnitMeta). The sink keeps, per table, the
// ranges of every unit it holds. A frame's rows that are already held (or on their way into the log
// from another stream) are not stored again; the frame is acknowledged once the rows that hold them
// are durable. The rest of the frame is logged with its unit id and kept ranges in the log record's
// meta section, and the Delta commit that takes the record adds one txn action per merged range:
// appId "loader-unit:<unit id>@<from>", version <to>. A restarted sink rebuilds the ranges from the
// table's txn actions and the log records not yet committed.

// unitAppPrefix starts the Delta txn appId of a unit range.
const unitAppPrefix = "loader-unit:"

// unitRange is a half-open row range [From, To) of a unit.
type unitRange struct{ From, To int64 }

// unitRecordMeta is the meta section of a log record holding rows of a tagged frame: the unit and
// the frame's ranges that the record keeps (the others were held already).
type unitRecordMeta struct {
	Unit string     `json:"unit"`
	From int64      `json:"from"` // the frame's first row in the unit
	Keep [][2]int64 `json:"keep"`
}

// claim is a range of a unit the sink holds: durable (fut nil) or on its way into the log.
type claim struct {
	from, to int64
	fut      *wal.Pending
}

// unitIndex is a table's unit ranges.
type unitIndex struct {
	mu    sync.Mutex
	units map[string][]claim // sorted by from, disjoint
}

func newUnitIndex() *unitIndex { return &unitIndex{units: map[string][]claim{}} }

// addDurable records a range the table or the log holds.
func (x *unitIndex) addDurable(unit string, from, to int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.insertLocked(unit, claim{from: from, to: to})
}

func (x *unitIndex) insertLocked(unit string, c claim) {
	cs := x.units[unit]
	i, _ := slices.BinarySearchFunc(cs, c.from, func(a claim, from int64) int {
		switch {
		case a.from < from:
			return -1
		case a.from > from:
			return 1
		}
		return 0
	})
	cs = slices.Insert(cs, i, c)
	// Merge durable neighbours.
	out := cs[:0]
	for _, c := range cs {
		if n := len(out); n > 0 && out[n-1].fut == nil && c.fut == nil && out[n-1].to >= c.from {
			out[n-1].to = max(out[n-1].to, c.to)
			continue
		}
		out = append(out, c)
	}
	x.units[unit] = out
}

// cleanLocked settles the unit's claims whose records are done: durable ones lose their future,
// failed ones are dropped (their rows are not held).
func (x *unitIndex) cleanLocked(unit string) {
	cs := x.units[unit]
	changed := false
	out := cs[:0]
	for _, c := range cs {
		if c.fut != nil {
			select {
			case <-c.fut.Done():
				changed = true
				if c.fut.Err() != nil {
					continue
				}
				c.fut = nil
			default:
			}
		}
		out = append(out, c)
	}
	x.units[unit] = out
	if changed {
		// Re-merge durable neighbours.
		cs := slices.Clone(out)
		x.units[unit] = nil
		for _, c := range cs {
			x.insertLocked(unit, c)
		}
	}
}

// store takes a frame's range [from, to) of unit: it works out which parts the sink does not hold yet
// and, when there are any, calls appendFn with them (relative to the unit) to log them, all under the
// index's lock so that two streams sending the same range store it once. It returns appendFn's
// pending record (nil when nothing was logged) and the pending records of the other parts, which the
// frame's acknowledgement must wait for.
func (x *unitIndex) store(unit string, from, to int64, appendFn func(keep []unitRange) (*wal.Pending, error)) (*wal.Pending, []*wal.Pending, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.cleanLocked(unit)
	var (
		keep []unitRange
		deps []*wal.Pending
		cur  = from
	)
	for _, c := range x.units[unit] {
		if c.to <= from || c.from >= to {
			continue
		}
		if c.fut != nil {
			deps = append(deps, c.fut)
		}
		if c.from > cur {
			keep = append(keep, unitRange{cur, c.from})
		}
		cur = max(cur, c.to)
	}
	if cur < to {
		keep = append(keep, unitRange{cur, to})
	}
	if len(keep) == 0 {
		return nil, deps, nil
	}
	fut, err := appendFn(keep)
	if err != nil {
		return nil, nil, err
	}
	for _, k := range keep {
		x.insertLocked(unit, claim{from: k.From, to: k.To, fut: fut})
	}
	return fut, deps, nil
}

// unitMetaBytes encodes a log record's meta section for rows kept of a tagged frame.
func unitMetaBytes(unit string, from int64, keep []unitRange) []byte {
	m := unitRecordMeta{Unit: unit, From: from}
	for _, k := range keep {
		m.Keep = append(m.Keep, [2]int64{k.From, k.To})
	}
	b, _ := json.Marshal(m) // strings and integers always marshal
	return b
}

// parseUnitMeta reads a log record's meta section; ok is false when the record has none.
func parseUnitMeta(meta []byte, rows int64) (m unitRecordMeta, ok bool, err error) {
	if len(meta) == 0 {
		return m, false, nil
	}
	if err := json.Unmarshal(meta, &m); err != nil {
		return m, false, fmt.Errorf("%w: meta section: %w", errBadRecord, err)
	}
	var n int64
	for _, k := range m.Keep {
		if k[0] < m.From || k[1] <= k[0] {
			return m, false, fmt.Errorf("%w: meta section: bad range [%d,%d) of a frame from row %d", errBadRecord, k[0], k[1], m.From)
		}
		n += k[1] - k[0]
	}
	if m.Unit == "" || n != rows {
		return m, false, fmt.Errorf("%w: meta section: unit %q keeps %d rows, the record says %d", errBadRecord, m.Unit, n, rows)
	}
	return m, true, nil
}

// unitTxns merges ranges by unit into the txn actions of a commit.
func unitTxns(ranges map[string][]unitRange) []warehouse.Txn {
	units := make([]string, 0, len(ranges))
	for u := range ranges {
		units = append(units, u)
	}
	slices.Sort(units)
	var out []warehouse.Txn
	for _, u := range units {
		rs := ranges[u]
		slices.SortFunc(rs, func(a, b unitRange) int { return cmp.Compare(a.From, b.From) })
		var merged []unitRange
		for _, r := range rs {
			if n := len(merged); n > 0 && merged[n-1].To >= r.From {
				merged[n-1].To = max(merged[n-1].To, r.To)
				continue
			}
			merged = append(merged, r)
		}
		for _, r := range merged {
			out = append(out, warehouse.Txn{AppID: unitAppPrefix + u + "@" + strconv.FormatInt(r.From, 10), Version: r.To})
		}
	}
	return out
}

// parseUnitTxn reads a txn appId and version written by unitTxns.
func parseUnitTxn(appID string, version int64) (unit string, r unitRange, ok bool) {
	rest, ok := strings.CutPrefix(appID, unitAppPrefix)
	if !ok {
		return "", r, false
	}
	i := strings.LastIndexByte(rest, '@')
	if i <= 0 {
		return "", r, false
	}
	from, err := strconv.ParseInt(rest[i+1:], 10, 64)
	if err != nil || from < 0 || version <= from {
		return "", r, false
	}
	return rest[:i], unitRange{from, version}, true
}
