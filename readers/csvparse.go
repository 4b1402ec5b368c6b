package readers

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// tokenizer splits CSV text into records. It is RFC 4180 with options: any single-byte delimiter
// and quote, an optional escape byte inside quoted fields, comment lines, blank lines skipped,
// LF or CRLF line ends, and quoted fields spanning lines. It counts lines so errors and bad rows
// can name them.
type tokenizer struct {
	br                      *bufio.Reader
	delim, quote, esc, cmnt byte
	noQuote, lazy           bool
	max                     int

	line    int64 // lines consumed
	off     int64 // file offset of the next byte to read (uncompressed files)
	limit   int64 // when >= 0, next ends (io.EOF) at the first line start between records at or after it
	partial bool  // the last line read has no line end (the text ends with it)
	rec     []byte
	ends    []int
	quoted  []bool // quoted[i]: field i was enclosed in quotes
	scratch []byte
}

// syntaxError is a CSV syntax error at a line.
type syntaxError struct {
	line   int64
	reason string
}

func (e *syntaxError) Error() string { return fmt.Sprintf("line %d: %s", e.line, e.reason) }

// readLine returns the next line including its '\n' (absent at the end of input). The slice is
// valid until the next call.
func (t *tokenizer) readLine() ([]byte, error) {
	line, err := t.br.ReadSlice('\n')
	if err == nil || (errors.Is(err, io.EOF) && len(line) > 0) {
		t.off += int64(len(line))
		t.partial = err != nil
		return line, nil
	}
	if !errors.Is(err, bufio.ErrBufferFull) {
		return nil, err
	}
	t.scratch = append(t.scratch[:0], line...)
	for {
		if len(t.scratch) > t.max {
			return nil, &syntaxError{line: t.line + 1, reason: fmt.Sprintf("a line longer than %d bytes", t.max)}
		}
		line, err = t.br.ReadSlice('\n')
		t.scratch = append(t.scratch, line...)
		if err == nil || errors.Is(err, io.EOF) {
			t.off += int64(len(t.scratch))
			t.partial = err != nil
			return t.scratch, nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return nil, err
		}
	}
}

// trimEOL drops a trailing "\n" or "\r\n".
func trimEOL(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
		if n := len(b); n > 0 && b[n-1] == '\r' {
			b = b[:n-1]
		}
	}
	return b
}

// next reads one record. It returns the line the record starts on; io.EOF at the end, and at the
// first line start at or after limit that is not inside a record (see csvSplit).
func (t *tokenizer) next() (int64, error) {
	var line []byte
	for {
		if t.limit >= 0 && t.off >= t.limit {
			return 0, io.EOF
		}
		l, err := t.readLine()
		if err != nil {
			return 0, err
		}
		t.line++
		body := trimEOL(l)
		if len(body) == 0 {
			continue // blank line
		}
		if t.cmnt != 0 && body[0] == t.cmnt {
			continue
		}
		line = l
		break
	}
	t.rec, t.ends, t.quoted = t.rec[:0], t.ends[:0], t.quoted[:0]
	start, err := t.record(line)
	return start, err
}

// record splits the record that starts with line into fields (reading on while a quoted field
// spans lines). It appends to local copies of the field slices, stored back when it returns, so
// that a field appended writes no pointer to the heap (no write barrier while the GC marks).
func (t *tokenizer) record(line []byte) (start int64, err error) {
	start = t.line
	rec, ends, quoted := t.rec, t.ends, t.quoted
	quote, delim, esc := t.quote, t.delim, t.esc
	quoting := !t.noQuote
	escaping := esc != 0 && esc != quote
	checkQuotes := quoting && !t.lazy
	pos := 0
	nextQuote := -1 // the first quote in line at or after pos (len(line): none), valid while >= pos
	for {
		// one field starts at pos
		if quoting && pos < len(line) && line[pos] == quote {
			pos++
			for {
				rest := line[pos:]
				qi := bytes.IndexByte(rest, quote)
				ei := -1
				if escaping {
					ei = bytes.IndexByte(rest, esc)
				}
				if ei >= 0 && (qi < 0 || ei < qi) {
					rec = append(rec, rest[:ei]...)
					pos += ei + 1
					if pos < len(line) {
						rec = append(rec, line[pos])
						pos++
						continue
					}
					// escape at the very end of input: keep it
					rec = append(rec, esc)
					continue
				}
				if qi < 0 {
					// the quoted field goes on to the next line
					rec = append(rec, rest...)
					if len(rec) > t.max {
						t.rec, t.ends, t.quoted = rec, ends, quoted
						return start, &syntaxError{line: start, reason: fmt.Sprintf("a record longer than %d bytes (an unterminated quote?)", t.max)}
					}
					l, err := t.readLine()
					if errors.Is(err, io.EOF) {
						t.rec, t.ends, t.quoted = rec, ends, quoted
						return start, &syntaxError{line: start, reason: "a quoted field is not closed before the end of the file"}
					}
					if err != nil {
						t.rec, t.ends, t.quoted = rec, ends, quoted
						return start, err
					}
					t.line++
					line, pos, nextQuote = l, 0, -1
					continue
				}
				rec = append(rec, rest[:qi]...)
				pos += qi + 1
				if pos < len(line) && line[pos] == quote && !escaping {
					rec = append(rec, quote) // doubled quote
					pos++
					continue
				}
				// closing quote: a delimiter or the end of the line must follow
				after := line[pos:]
				if len(after) > 0 && after[0] == delim {
					ends = append(ends, len(rec))
					quoted = append(quoted, true)
					pos++
					break
				}
				if len(trimEOL(after)) == 0 {
					ends = append(ends, len(rec))
					quoted = append(quoted, true)
					t.rec, t.ends, t.quoted = rec, ends, quoted
					return start, nil
				}
				if !t.lazy {
					t.rec, t.ends, t.quoted = rec, ends, quoted
					return start, &syntaxError{line: t.line, reason: fmt.Sprintf("field %d: unexpected text after a closing quote", len(ends)+1)}
				}
				rec = append(rec, quote)
			}
			continue
		}
		// unquoted field
		rest := line[pos:]
		di := bytes.IndexByte(rest, delim)
		last := di < 0
		var field []byte
		if last {
			field = trimEOL(rest)
		} else {
			field = rest[:di]
		}
		if checkQuotes && nextQuote < pos {
			// one search for the rest of the line, rather than one for each field
			nextQuote = indexFrom(line, pos, quote)
		}
		if checkQuotes && nextQuote < pos+len(field) {
			t.rec, t.ends, t.quoted = rec, ends, quoted
			return start, &syntaxError{line: t.line, reason: fmt.Sprintf("field %d: a quote inside an unquoted field (use lazy quotes to accept it)", len(ends)+1)}
		}
		rec = append(rec, field...)
		ends = append(ends, len(rec))
		quoted = append(quoted, false)
		if last {
			t.rec, t.ends, t.quoted = rec, ends, quoted
			return start, nil
		}
		pos += di + 1
	}
}

// fields returns the number of fields of the current record.
func (t *tokenizer) fields() int { return len(t.ends) }

// field returns field i of the current record; valid until the next call to next.
func (t *tokenizer) field(i int) []byte {
	start := 0
	if i > 0 {
		start = t.ends[i-1]
	}
	return t.rec[start:t.ends[i]]
}

// strings copies the current record's fields.
func (t *tokenizer) strings() []string {
	out := make([]string, t.fields())
	for i := range out {
		out[i] = string(t.field(i))
	}
	return out
}

var errNotASCII = errors.New("must be a single ASCII character")
