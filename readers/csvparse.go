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
	t.rec, t.ends, t.quoted = t.rec[:0], t.ends[:0], t.quoted[:0]
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
	start := t.line
	pos := 0
	for {
		// one field starts at pos
		if !t.noQuote && pos < len(line) && line[pos] == t.quote {
			pos++
			for {
				rest := line[pos:]
				qi := bytes.IndexByte(rest, t.quote)
				ei := -1
				if t.esc != 0 && t.esc != t.quote {
					ei = bytes.IndexByte(rest, t.esc)
				}
				if ei >= 0 && (qi < 0 || ei < qi) {
					t.rec = append(t.rec, rest[:ei]...)
					pos += ei + 1
					if pos < len(line) {
						t.rec = append(t.rec, line[pos])
						pos++
						continue
					}
					// escape at the very end of input: keep it
					t.rec = append(t.rec, t.esc)
					continue
				}
				if qi < 0 {
					// the quoted field goes on to the next line
					t.rec = append(t.rec, rest...)
					if len(t.rec) > t.max {
						return start, &syntaxError{line: start, reason: fmt.Sprintf("a record longer than %d bytes (an unterminated quote?)", t.max)}
					}
					l, err := t.readLine()
					if errors.Is(err, io.EOF) {
						return start, &syntaxError{line: start, reason: "a quoted field is not closed before the end of the file"}
					}
					if err != nil {
						return start, err
					}
					t.line++
					line, pos = l, 0
					continue
				}
				t.rec = append(t.rec, rest[:qi]...)
				pos += qi + 1
				if pos < len(line) && line[pos] == t.quote && (t.esc == 0 || t.esc == t.quote) {
					t.rec = append(t.rec, t.quote) // doubled quote
					pos++
					continue
				}
				// closing quote: a delimiter or the end of the line must follow
				after := line[pos:]
				if len(after) > 0 && after[0] == t.delim {
					t.ends = append(t.ends, len(t.rec))
					t.quoted = append(t.quoted, true)
					pos++
					break
				}
				if len(trimEOL(after)) == 0 {
					t.ends = append(t.ends, len(t.rec))
					t.quoted = append(t.quoted, true)
					return start, nil
				}
				if !t.lazy {
					return start, &syntaxError{line: t.line, reason: fmt.Sprintf("field %d: unexpected text after a closing quote", len(t.ends)+1)}
				}
				t.rec = append(t.rec, t.quote)
			}
			continue
		}
		// unquoted field
		rest := line[pos:]
		di := bytes.IndexByte(rest, t.delim)
		last := di < 0
		var field []byte
		if last {
			field = trimEOL(rest)
		} else {
			field = rest[:di]
		}
		if !t.noQuote && !t.lazy && bytes.IndexByte(field, t.quote) >= 0 {
			return start, &syntaxError{line: t.line, reason: fmt.Sprintf("field %d: a quote inside an unquoted field (use lazy quotes to accept it)", len(t.ends)+1)}
		}
		t.rec = append(t.rec, field...)
		t.ends = append(t.ends, len(t.rec))
		t.quoted = append(t.quoted, false)
		if last {
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
