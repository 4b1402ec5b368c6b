package manifest

import (
	"cmp"
	"encoding/binary"
	"slices"
	"strings"
)

// A manifest keeps the state of every file it ever recorded (a million for a million-object
// prefix), so that state is small, and smallest for a finished unit: TestHeapPerFile measures it.

// fileIndex holds the state of every file version a manifest knows. Its zero value is empty.
type fileIndex struct {
	// byKey maps a FileID's key (see appendKey) to its state: a key is the whole FileID in one
	// string, one allocation per file and a 16-byte map key instead of five strings and 80 bytes.
	byKey map[string]*fileState
	// schemas are the schema fingerprints the keys hold by number, since most files share one, and
	// schemaNum their numbers. (A number costs a key a byte where a unique.Handle would take eight,
	// and the table goes with the manifest.)
	schemas   []string
	schemaNum map[string]int
	// failed says why the last run that read a file gave it up, for the few files that have a reason.
	failed map[*fileState]string
}

// fileState is what the manifest holds about one file version that has its "file" line in the
// manifest (or in its buffer).
type fileState struct {
	units []unitState // sorted by unit number
	idx   int
}

// fileEntry is a file's key and state.
type fileEntry struct {
	key string
	fs  *fileState
}

// get returns f's state, or nil.
func (ix *fileIndex) get(f FileID) *fileState {
	num, ok := ix.schemaNum[f.Schema]
	if !ok {
		return nil
	}
	var buf [256]byte
	return ix.byKey[string(appendKey(buf[:0], f, num))]
}

// add adds f's state, which get must not have.
func (ix *fileIndex) add(f FileID, fs *fileState) {
	if ix.byKey == nil {
		ix.byKey, ix.schemaNum = map[string]*fileState{}, map[string]int{}
	}
	num, ok := ix.schemaNum[f.Schema]
	if !ok {
		num = len(ix.schemas)
		ix.schemas = append(ix.schemas, strings.Clone(f.Schema))
		ix.schemaNum[ix.schemas[num]] = num
	}
	var buf [256]byte
	ix.byKey[string(appendKey(buf[:0], f, num))] = fs
}

// setFailed records why the last run that read the file gave it up ("" for no reason).
func (ix *fileIndex) setFailed(fs *fileState, why string) {
	switch {
	case why == "":
		delete(ix.failed, fs)
	case ix.failed == nil:
		ix.failed = map[*fileState]string{fs: why}
	default:
		ix.failed[fs] = why
	}
}

// inOrder returns every file in the order of their numbers.
func (ix *fileIndex) inOrder() []fileEntry {
	out := make([]fileEntry, 0, len(ix.byKey))
	for key, fs := range ix.byKey {
		out = append(out, fileEntry{key, fs})
	}
	slices.SortFunc(out, func(a, b fileEntry) int { return cmp.Compare(a.fs.idx, b.fs.idx) })
	return out
}

// appendKey appends f's key, with its schema's number: the numbers as uvarints, then the ETag and
// the layout each after its length, then the path, the rest of the key. Every field but the last
// says where it ends, so two FileIDs have the same key only when they are equal.
func appendKey(b []byte, f FileID, schema int) []byte {
	b = binary.AppendUvarint(b, uint64(schema))
	b = binary.AppendUvarint(b, uint64(f.Size))
	b = binary.AppendUvarint(b, uint64(f.ModTimeNano))
	b = binary.AppendUvarint(b, uint64(len(f.ETag)))
	b = append(b, f.ETag...)
	b = binary.AppendUvarint(b, uint64(len(f.Layout)))
	b = append(b, f.Layout...)
	return append(b, f.Path...)
}

// id returns the FileID of a key made by appendKey. Its strings share the key's bytes.
func (ix *fileIndex) id(key string) FileID {
	next := func() uint64 {
		v, n := binary.Uvarint([]byte(key[:min(len(key), binary.MaxVarintLen64)]))
		key = key[n:]
		return v
	}
	field := func() string {
		n := next()
		s := key[:n]
		key = key[n:]
		return s
	}
	f := FileID{Schema: ix.schemas[next()], Size: int64(next()), ModTimeNano: int64(next()), ETag: field(), Layout: field()}
	f.Path = key
	return f
}

// unitState is what the manifest holds about one unit of a file.
type unitState struct {
	unit int
	rows int64 // -1 until known
	// r holds the unit's row ranges. It is nil when they are those of a finished unit, which is
	// how most units end: rows [0, rows) acknowledged (none while rows is unknown), nothing
	// pending, nothing duplicated.
	r *unitRanges
}

// unitRanges are a unit's row ranges, each sorted and merged.
type unitRanges struct {
	acked []Range
	// pending are the intents not acknowledged: what was sent less what was acknowledged, the
	// only part of the intents anything asks about (a compaction writes only these).
	pending []Range
	dup     []Range // sent again while their fate was unknown
}

// unit returns unit n's state, adding it if needed. The pointer is valid until the next unit is added.
func (fs *fileState) unit(n int) *unitState {
	i, ok := slices.BinarySearchFunc(fs.units, n, byUnit)
	if !ok {
		fs.units = slices.Insert(fs.units, i, unitState{unit: n, rows: -1})
	}
	return &fs.units[i]
}

// find returns unit n's state, or nil when it has none.
func (fs *fileState) find(n int) *unitState {
	if i, ok := slices.BinarySearchFunc(fs.units, n, byUnit); ok {
		return &fs.units[i]
	}
	return nil
}

func byUnit(u unitState, n int) int { return cmp.Compare(u.unit, n) }

// acked returns the acknowledged ranges. The caller must not modify them.
func (u *unitState) acked() []Range {
	if u.r != nil {
		return u.r.acked
	}
	if u.rows > 0 {
		return []Range{{0, u.rows}}
	}
	return nil
}

// pending returns the ranges sent and not acknowledged. The caller must not modify them.
func (u *unitState) pending() []Range {
	if u.r == nil {
		return nil
	}
	return u.r.pending
}

// dup returns the ranges sent again while their fate was unknown. The caller must not modify them.
func (u *unitState) dup() []Range {
	if u.r == nil {
		return nil
	}
	return u.r.dup
}

// done reports whether the unit's row count is known and every row is acknowledged.
func (u *unitState) done() bool {
	return u.rows >= 0 && (u.r == nil || u.rows == 0 || covered(u.r.acked, Range{0, u.rows}))
}

// intended reports whether every row of r is acknowledged or pending already, so that an intent to
// send r again says nothing new.
func (u *unitState) intended(r Range) bool {
	for _, x := range subtract(r, u.acked()) {
		if !covered(u.pending(), x) {
			return false
		}
	}
	return true
}

// setRows records the unit's row count.
func (u *unitState) setRows(rows int64) {
	u.edit()
	u.rows = rows
	u.settle()
}

// ack adds r to the acknowledged ranges, so it is no longer pending.
func (u *unitState) ack(r Range) {
	x := u.edit()
	x.acked = addRange(x.acked, r)
	x.pending = cut(x.pending, r)
	u.settle()
}

// sent adds the rows of r not acknowledged to the pending ranges.
func (u *unitState) sent(r Range) {
	x := u.edit()
	for _, p := range subtract(r, x.acked) {
		x.pending = addRange(x.pending, p)
	}
	u.settle()
}

// duplicated adds r to the ranges sent again.
func (u *unitState) duplicated(r Range) {
	x := u.edit()
	x.dup = addRange(x.dup, r)
}

// edit returns the unit's ranges to change, spelling out those a nil r stands for. Call settle after.
func (u *unitState) edit() *unitRanges {
	if u.r == nil {
		u.r = &unitRanges{acked: u.acked()}
	}
	return u.r
}

// settle lets the unit's ranges go when they are those a nil r stands for.
func (u *unitState) settle() {
	x := u.r
	if x == nil || len(x.pending) > 0 || len(x.dup) > 0 {
		return
	}
	if len(x.acked) == 0 && u.rows <= 0 || len(x.acked) == 1 && x.acked[0] == (Range{0, u.rows}) {
		u.r = nil
	}
}

// addRange inserts r into sorted, merged ranges, merging overlapping and adjacent ones.
func addRange(rs []Range, r Range) []Range {
	i, _ := slices.BinarySearchFunc(rs, r.From, func(x Range, from int64) int {
		switch {
		case x.To < from:
			return -1
		case x.From > from:
			return 1
		}
		return 0
	})
	// rs[i:] are the ranges that end at or after r.From; merge every one that starts at or before r.To.
	j := i
	for j < len(rs) && rs[j].From <= r.To {
		r.From = min(r.From, rs[j].From)
		r.To = max(r.To, rs[j].To)
		j++
	}
	return slices.Replace(rs, i, j, r)
}

// cut removes r from sorted, merged ranges (nil when none is left).
func cut(rs []Range, r Range) []Range {
	// rs[i:j] are the ranges that overlap r.
	i, _ := slices.BinarySearchFunc(rs, r.From, func(x Range, from int64) int { return cmp.Compare(x.To, from+1) })
	j := i
	for j < len(rs) && rs[j].From < r.To {
		j++
	}
	if i == j {
		return rs
	}
	var buf [2]Range
	keep := buf[:0]
	if rs[i].From < r.From {
		keep = append(keep, Range{rs[i].From, r.From})
	}
	if rs[j-1].To > r.To {
		keep = append(keep, Range{r.To, rs[j-1].To})
	}
	if rs = slices.Replace(rs, i, j, keep...); len(rs) == 0 {
		return nil
	}
	return rs
}

// covered reports whether rs covers r entirely.
func covered(rs []Range, r Range) bool {
	for _, x := range rs {
		if x.From <= r.From && r.To <= x.To {
			return true
		}
	}
	return false
}

// subtract returns the parts of r not covered by rs (sorted, merged).
func subtract(r Range, rs []Range) []Range {
	var out []Range
	cur := r.From
	for _, x := range rs {
		if x.To <= cur {
			continue
		}
		if x.From >= r.To {
			break
		}
		if x.From > cur {
			out = append(out, Range{cur, x.From})
		}
		cur = max(cur, x.To)
		if cur >= r.To {
			return out
		}
	}
	if cur < r.To {
		out = append(out, Range{cur, r.To})
	}
	return out
}
