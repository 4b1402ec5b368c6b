package readers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"os"
	"sync"
)

// Splitting an uncompressed CSV file into units by byte range.
//
// A file of size bytes has n units with nominal starts start_k = k*size/n (see csvUnitStarts). A
// record boundary is a line start at which the tokenizer is between records: the start of the text
// (after a BOM), or the start of a line that follows a record, a blank line or a comment line, so
// never a line inside a quoted field. Unit 0 starts at the start of the text; unit k > 0 starts at
// B_k, the first record boundary at or after start_k that follows the header record (when the file
// has one), or at the end of the file when there is none. Unit k ends where unit k+1 starts.
//
// The tokenizer keeps no state between records but its line count, so a tokenizer started at B_k
// with the number of line ends before B_k yields the records, line numbers and errors of the
// whole-file tokenizer from there on, and its limit (start_k+1) makes it stop exactly at B_k+1:
// the records of the units, in order, are the records of the file.
//
// B_k depends only on the bytes of the file, so a file maps unit k to the same rows on every run
// (the manifest resumes by unit index and unit-relative rows). It is found by whichever comes
// first: the decoder of unit k-1, which stops at B_k and records it, or csvScan, a quote-aware pass
// over the text that follows the tokenizer's rules for line ends, quotes, escapes, comments and
// blank lines without building fields, started from the furthest boundary known before start_k.
// When both find B_k they must agree; a disagreement fails the unit rather than lose or repeat
// rows. The scan cannot pass a syntax error (after one the tokenizer stops, so nothing defines the
// records after it): the units beyond it fail with the tokenizer's own error for that record.

// csvUnit size policy: a file is cut into csvUnitsPerFile units of equal nominal size, kept within
// [csvMinUnitBytes, csvMaxUnitBytes] (so smaller files have fewer units, and a file under twice the
// minimum is one unit). The unit count depends on the file's size alone, never on the decoder
// count or the machine, so a resume on another machine or with other flags maps unit indices to
// the same rows.
const (
	csvUnitsPerFile = 16
	csvMinUnitBytes = 16 << 20
	csvMaxUnitBytes = 64 << 20

	csvScanWindow    = 256 << 10 // bytes the scan reads at a time
	csvScanStep      = 32 << 20  // bytes the scan reads between heartbeats (see csvSplit.start)
	csvProgressBytes = 256 << 10 // bytes a decoder reads between the points it records (reached)
)

// csvUnitStarts returns the nominal starts of the units of an uncompressed file of size bytes.
// unitBytes, when positive, replaces the policy's unit size (tests use tiny units).
func csvUnitStarts(size, unitBytes int64) []int64 {
	per := unitBytes
	if per <= 0 {
		per = min(max(size/csvUnitsPerFile, csvMinUnitBytes), csvMaxUnitBytes)
	}
	n := max(1, size/per)
	starts := make([]int64, n)
	for k := range starts {
		hi, lo := bits.Mul64(uint64(k), uint64(size))
		q, _ := bits.Div64(hi, lo, uint64(n)) // k < n, so the quotient fits
		starts[k] = int64(q)
	}
	return starts
}

// csvBound is where a unit starts: its first byte, and the line ends before it.
type csvBound struct{ off, line int64 }

// csvSplit holds the unit starts of one uncompressed CSV file as they are found. It is safe for
// concurrent use by the ReadUnit calls of the file's units.
type csvSplit struct {
	path   string
	d      *dialect
	starts []int64 // nominal start of each unit
	header bool    // the first record is a header (which unit 0 holds)

	token chan struct{} // held by the one goroutine scanning; guards scan and buf
	scan  csvScan
	buf   []byte
	// csvScanWindow, csvScanStep and csvProgressBytes; tests lower them
	window int
	step   int64
	every  int64

	mu     sync.Mutex
	bounds []csvBound
	known  []bool
	// reached[k] is the furthest record boundary unit k's decoder has reported, before its end
	// (valid when hasReached[k]).
	reached    []csvBound
	hasReached []bool
	// err is the syntax error a scan stopped at, looking for unit errUnit's start: units from
	// errUnit on, which start past it, fail with it.
	err     error
	errUnit int
	changed chan struct{} // closed and replaced when a bound is found or a scan step ends
}

func newCSVSplit(path string, d *dialect, starts []int64, bom int64, header bool) *csvSplit {
	sp := &csvSplit{
		path: path, d: d, starts: starts, header: header,
		token:      make(chan struct{}, 1),
		bounds:     make([]csvBound, len(starts)),
		known:      make([]bool, len(starts)),
		reached:    make([]csvBound, len(starts)),
		hasReached: make([]bool, len(starts)),
		changed:    make(chan struct{}),
		window:     csvScanWindow,
		step:       csvScanStep,
		every:      csvProgressBytes,
	}
	sp.bounds[0], sp.known[0] = csvBound{off: bom}, true
	sp.scan = csvScan{off: bom, next: 1, header: header}
	return sp
}

// limit is where unit k's tokenizer stops: the next unit's nominal start, or -1 for the last unit.
func (sp *csvSplit) limit(k int) int64 {
	if k+1 < len(sp.starts) {
		return sp.starts[k+1]
	}
	return -1
}

// errSplitMismatch is a failed self-check: two ways of finding a unit's start disagree.
var errSplitMismatch = errors.New("internal error: CSV unit bounds disagree")

// found records that unit k starts at b.
func (sp *csvSplit) found(k int, b csvBound) error {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.foundLocked(k, b)
}

func (sp *csvSplit) foundLocked(k int, b csvBound) error {
	if sp.known[k] {
		if sp.bounds[k] != b {
			return fmt.Errorf("%w: unit %d starts at byte %d (line %d) or at byte %d (line %d)", errSplitMismatch,
				k, sp.bounds[k].off, sp.bounds[k].line+1, b.off, b.line+1)
		}
		return nil
	}
	sp.bounds[k], sp.known[k] = b, true
	sp.signalLocked()
	return nil
}

// errFor is the syntax error unit k's start lies past, if a scan has met one. The caller holds mu.
func (sp *csvSplit) errFor(k int) error {
	if sp.err != nil && k >= sp.errUnit {
		return sp.err
	}
	return nil
}

// reach records that unit k's decoder is at b, a record boundary before the unit's end.
func (sp *csvSplit) reach(k int, b csvBound) {
	sp.mu.Lock()
	if !sp.hasReached[k] || b.off > sp.reached[k].off {
		sp.reached[k], sp.hasReached[k] = b, true
	}
	sp.mu.Unlock()
}

func (sp *csvSplit) signalLocked() {
	close(sp.changed)
	sp.changed = make(chan struct{})
}

// start returns where unit k starts, scanning for it (on st, so a stuck read is abandoned when ctx
// ends) when no decoder has recorded it yet. A scan reads at most csvScanStep bytes at a time, and
// beat is called between steps, and when another unit's scan moves on while this one waits, so a
// caller watching for progress sees some while a far unit's start is looked for.
func (sp *csvSplit) start(ctx context.Context, st *stepper, k int, beat func() error) (csvBound, error) {
	for {
		sp.mu.Lock()
		b, ok, err, changed := sp.bounds[k], sp.known[k], sp.errFor(k), sp.changed
		sp.mu.Unlock()
		switch {
		case ok:
			return b, nil
		case err != nil:
			return csvBound{}, err
		}
		select {
		case sp.token <- struct{}{}:
			err := st.run(ctx, func() error {
				defer func() { <-sp.token }()
				return sp.scanStep(ctx, k)
			})
			if err != nil {
				return csvBound{}, err
			}
		case <-changed:
		case <-ctx.Done():
			return csvBound{}, ctx.Err()
		}
		sp.mu.Lock()
		ok = sp.known[k]
		sp.mu.Unlock()
		if !ok {
			if err := beat(); err != nil {
				return csvBound{}, err
			}
		}
	}
}

// scanStep scans for unit k's start, from the furthest record boundary known before it (or from
// where the last scan stopped, when that is further on the way), for at most sp.step bytes,
// recording every unit start it passes. The caller holds the token.
func (sp *csvSplit) scanStep(ctx context.Context, k int) error {
	sp.mu.Lock()
	if err := sp.errFor(k); sp.known[k] || err != nil {
		sp.mu.Unlock()
		return err
	}
	// A unit start B[j] or a point unit j's decoder has reached: the scan goes on from there with
	// unit j+1's start the next to find (the point lies before start[j+1], as a decoder records
	// none at or past its limit; B[j] may not, and is then B[j+1] too).
	from, next := sp.bounds[0], 1
	for j := 0; j < k; j++ {
		if sp.known[j] && sp.bounds[j].off > from.off {
			from, next = sp.bounds[j], j+1
		}
		if sp.hasReached[j] && sp.reached[j].off > from.off {
			from, next = sp.reached[j], j+1
		}
	}
	sp.mu.Unlock()
	if sp.scan.next > k || sp.scan.off <= from.off {
		// The scan is behind a known boundary, or went on from one past unit k: scan from there.
		sp.scan = csvScan{off: from.off, line: from.line, next: next, header: next == 1 && from == sp.bounds[0] && sp.header}
	}
	defer func() {
		sp.mu.Lock()
		sp.signalLocked()
		sp.mu.Unlock()
	}()
	f, err := os.Open(sp.path)
	if err != nil {
		return err
	}
	defer f.Close()
	if sp.buf == nil {
		sp.buf = make([]byte, sp.window)
	}
	s := &sp.scan
	for stepFrom := s.off; s.off-stepFrom < sp.step; {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := f.ReadAt(sp.buf, s.off)
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		w, eof, p := sp.buf[:n], n < len(sp.buf), 0
		for {
			var res csvScanResult
			p, res = s.window(w, p, eof, sp.d, sp.starts[s.next])
			switch res {
			case scanMore:
			case scanFound, scanEOF:
				// Every unit whose nominal start the boundary is at or past starts there (at the
				// end of the text, every unit left).
				b := csvBound{off: s.off, line: s.line}
				sp.mu.Lock()
				var err error
				for s.next < len(sp.starts) && (res == scanEOF || sp.starts[s.next] <= b.off) && err == nil {
					err = sp.foundLocked(s.next, b)
					s.next++
				}
				done := s.next > k || s.next == len(sp.starts)
				sp.mu.Unlock()
				if err != nil || done {
					return err
				}
				continue
			case scanSyntax:
				err := sp.syntaxError(s.rec)
				var re *RowError
				if errors.As(err, &re) {
					sp.mu.Lock()
					if sp.err == nil || s.next < sp.errUnit {
						sp.err, sp.errUnit = err, s.next
					}
					sp.mu.Unlock()
				}
				return err
			}
			break
		}
	}
	return nil
}

// syntaxError is the tokenizer's error for the record at rec, which the scan found invalid.
func (sp *csvSplit) syntaxError(rec csvBound) error {
	f, err := os.Open(sp.path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Seek(rec.off, io.SeekStart); err != nil {
		return err
	}
	t := sp.d.tokenizer(f)
	t.off, t.line = rec.off, rec.line
	_, err = t.next()
	var se *syntaxError
	switch {
	case errors.As(err, &se):
		return &RowError{File: sp.path, Line: se.line, Reason: se.reason}
	case err == nil:
		return fmt.Errorf("%w: the scan finds the record at line %d invalid, the parser does not", errSplitMismatch, rec.line+1)
	}
	return err
}

// The states of csvScan: where in the text it is.
const (
	stLine    uint8 = iota // at a line start between records
	stComment              // in a comment line
	stField                // at the start of a field that does not start a line
	stUnq                  // in the unquoted fields of a record's line
	stQuoted               // in a quoted field
)

type csvScanResult uint8

const (
	scanMore   csvScanResult = iota // the window is used up: read on from off
	scanFound                       // off is a record boundary at or after the target
	scanEOF                         // the text ends (between records) at off
	scanSyntax                      // the record at rec is invalid: the tokenizer stops there
)

// csvScan finds record boundaries as the tokenizer (next, readLine) reads records, without building
// fields: a state machine over the text that only looks at line ends, quotes, escapes, delimiters
// right before a quote, and comment and blank lines at record starts. In unquoted text it jumps
// from quote to quote and line end to line end with bytes.IndexByte.
type csvScan struct {
	off    int64 // the next byte to look at
	line   int64 // line ends before off
	state  uint8
	prev   byte     // the byte before off
	rec    csvBound // where the current record starts
	header bool     // the first record, a header, has not ended
	next   int      // the unit whose start the scan looks for
}

// window runs the scan over w, the text from s.off-p (w[p] is at s.off), up to a record boundary
// at or after target (not before the header has ended), the end of w, or a syntax error. eof says
// the text ends with w. It returns where it stopped in w, with s describing the text there.
func (s *csvScan) window(w []byte, p int, eof bool, d *dialect, target int64) (int, csvScanResult) {
	n := len(w)
	base := s.off - int64(p)
	quote, delim, esc, cmnt := d.quote, d.delim, d.esc, d.cmnt
	quoting, escaping, lazy := !d.o.NoQuote, d.esc != 0 && d.esc != d.quote, d.o.LazyQuotes
	line, state := s.line, s.state
	// The next '\n' and the next escape in w at or after p (len(w): none), valid while >= p.
	eol, nextEsc := -1, -1
	// more says k bytes from p are in w, or the text ends within them.
	more := func(p, k int) bool { return p+k <= n || eof }
	var res csvScanResult
loop:
	for {
		switch state {
		case stLine:
			if !s.header && base+int64(p) >= target {
				res = scanFound
				break loop
			}
			if p == n {
				res = scanMore
				if eof {
					res = scanEOF
				}
				break loop
			}
			if !more(p, 2) {
				res = scanMore
				break loop
			}
			switch c := w[p]; {
			case c == '\n':
				line++
				p++
				continue
			case c == '\r' && p+1 < n && w[p+1] == '\n':
				line++
				p += 2
				continue
			case cmnt != 0 && c == cmnt:
				state = stComment
				continue
			}
			s.rec = csvBound{off: base + int64(p), line: line}
			state = stField
		case stComment:
			e := indexFrom(w, p, '\n')
			if e == n {
				p = n
				res = scanMore
				if eof {
					res = scanEOF
				}
				break loop
			}
			p = e + 1
			line++
			state = stLine
		case stField:
			if p == n {
				res = scanMore
				if eof {
					s.header = false
					res = scanEOF
				}
				break loop
			}
			if quoting && w[p] == quote {
				state = stQuoted
				p++
				continue
			}
			state = stUnq
		case stUnq:
			if eol < p {
				eol = indexFrom(w, p, '\n')
			}
			if quoting {
				if q := bytes.IndexByte(w[p:eol], quote); q >= 0 {
					q += p
					before := s.prev
					if q > 0 {
						before = w[q-1]
					}
					switch {
					case before == delim: // a quoted field starts
						state = stQuoted
						p = q + 1
					case lazy: // a literal quote inside an unquoted field
						p = q + 1
					default:
						p = q
						res = scanSyntax
						break loop
					}
					continue
				}
			}
			if eol == n {
				p = n
				res = scanMore
				if eof {
					s.header = false
					res = scanEOF
				}
				break loop
			}
			p = eol + 1
			line++
			s.header = false
			state = stLine
		case stQuoted:
			q := indexFrom(w, p, quote)
			if escaping {
				if nextEsc < p {
					nextEsc = indexFrom(w, p, esc)
				}
				if e := nextEsc; e < q {
					if e+1 >= n { // the escaped byte is not in w
						if eof {
							res = scanSyntax // an escape ends the text inside a quoted field
							break loop
						}
						line += countLines(w[p:e])
						p = e
						res = scanMore
						break loop
					}
					line += countLines(w[p : e+2])
					p = e + 2
					continue
				}
			}
			if q == n {
				line += countLines(w[p:])
				p = n
				res = scanMore
				if eof {
					res = scanSyntax // the quoted field is not closed
				}
				break loop
			}
			if !more(q, 3) {
				line += countLines(w[p:q])
				p = q
				res = scanMore
				break loop
			}
			if eol < p {
				eol = indexFrom(w, p, '\n')
			}
			if eol < q {
				line += countLines(w[p:q])
			}
			if q+1 == n { // the text ends after the closing quote
				p = n
				s.header = false
				res = scanEOF
				break loop
			}
			switch c := w[q+1]; {
			case c == quote && !escaping: // a doubled quote
				p = q + 2
				continue
			case c == delim:
				p = q + 2
				state = stField
				continue
			case c == '\n':
				p = q + 2
				line++
				s.header = false
				state = stLine
				continue
			case c == '\r' && q+2 < n && w[q+2] == '\n':
				p = q + 3
				line++
				s.header = false
				state = stLine
				continue
			}
			if !lazy {
				p = q
				res = scanSyntax
				break loop
			}
			p = q + 1 // a literal quote: the field goes on
		}
	}
	s.off = base + int64(p)
	s.line, s.state = line, state
	if p > 0 {
		s.prev = w[p-1]
	}
	return p, res
}

// indexFrom returns the index in w of the first c at or after p, or len(w) when there is none.
func indexFrom(w []byte, p int, c byte) int {
	if i := bytes.IndexByte(w[p:], c); i >= 0 {
		return p + i
	}
	return len(w)
}

// countLines counts the line ends in b.
func countLines(b []byte) int64 { return int64(bytes.Count(b, []byte{'\n'})) }
