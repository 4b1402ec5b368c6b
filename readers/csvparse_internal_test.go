package readers

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"syscall"
	"testing"
)

// refTokenizer is the tokenizer as it was before record() (the commit that split CSV files into
// units), kept to check that the faster one splits every text the same way.
// refTokenizer splits CSV text into records. It is RFC 4180 with options: any single-byte delimiter
// and quote, an optional escape byte inside quoted fields, comment lines, blank lines skipped,
// LF or CRLF line ends, and quoted fields spanning lines. It counts lines so errors and bad rows
// can name them.
type refTokenizer struct {
	br                      *bufio.Reader
	delim, quote, esc, cmnt byte
	noQuote, lazy           bool
	max                     int

	line    int64 // lines consumed
	rec     []byte
	ends    []int
	quoted  []bool // quoted[i]: field i was enclosed in quotes
	scratch []byte
}

// readLine returns the next line including its '\n' (absent at the end of input). The slice is
// valid until the next call.
func (t *refTokenizer) readLine() ([]byte, error) {
	line, err := t.br.ReadSlice('\n')
	if err == nil || (errors.Is(err, io.EOF) && len(line) > 0) {
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
			return t.scratch, nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return nil, err
		}
	}
}

// next reads one record. It returns the line the record starts on; io.EOF at the end.
func (t *refTokenizer) next() (int64, error) {
	t.rec, t.ends, t.quoted = t.rec[:0], t.ends[:0], t.quoted[:0]
	var line []byte
	for {
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
func (t *refTokenizer) fields() int { return len(t.ends) }

// field returns field i of the current record; valid until the next call to next.
func (t *refTokenizer) field(i int) []byte {
	start := 0
	if i > 0 {
		start = t.ends[i-1]
	}
	return t.rec[start:t.ends[i]]
}

// strings copies the current record's fields.
func (t *refTokenizer) strings() []string {
	out := make([]string, t.fields())
	for i := range out {
		out[i] = string(t.field(i))
	}
	return out
}

// tokenize reads every record of text with next, rendering records and the error as text.
func tokenize(next func() (int64, error), fields func() []string, quoted func() []bool, line func() int64) []string {
	var out []string
	for {
		start, err := next()
		if err != nil {
			var se *syntaxError
			if errors.As(err, &se) {
				out = append(out, fmt.Sprintf("syntax error at line %d: %s", se.line, se.reason))
			} else if !errors.Is(err, io.EOF) {
				out = append(out, "error: "+err.Error())
			}
			return append(out, fmt.Sprintf("lines %d", line()))
		}
		out = append(out, fmt.Sprintf("line %d: %q %v", start, fields(), quoted()))
	}
}

func checkTokenizer(t *testing.T, text []byte) {
	for _, o := range scanDialects {
		for _, max := range []int{8, 64 << 20} {
			o.MaxRecordBytes = max
			d, err := o.resolve("f.csv")
			if err != nil {
				t.Fatal(err)
			}
			tk := d.tokenizer(bytes.NewReader(text))
			ref := &refTokenizer{
				br: bufio.NewReaderSize(bytes.NewReader(text), 256<<10), delim: d.delim, quote: d.quote, esc: d.esc, cmnt: d.cmnt,
				noQuote: d.o.NoQuote, lazy: d.o.LazyQuotes, max: d.maxRecord(),
			}
			got := tokenize(tk.next, tk.strings, func() []bool { return slices.Clone(tk.quoted) }, func() int64 { return tk.line })
			want := tokenize(ref.next, ref.strings, func() []bool { return slices.Clone(ref.quoted) }, func() int64 { return ref.line })
			if !slices.Equal(got, want) {
				t.Fatalf("%+v: tokenizer on %q:\n%s\nwant, as before:\n%s", o, text, got, want)
			}
		}
	}
}

func TestTokenizerMatchesReference(t *testing.T) {
	for _, text := range []string{
		"id,name\n1,\"a\nb\"\n2,\"c,\"\"d\"\"\ne\nf\"\n3,\"\n\"\n4,plain\n5,\"\"\n",
		"id,name\r\n1,\"a\r\nb\"\r\n2,x\r\n\r\n3,\"\r\n\r\n\"\r\n",
		"# \"a comment\n\nid,name\n\n#\"\n1,a\n\n\n# x,\"y\n2,\"#\n\"\n#\n3,c\n",
		"id;name\n1;'it\\'s'\n2;'a\\\nb'\n3;'\\\\'\n4;'x\\'\ny'\n5;'a''b'\n",
		"id,name\n1,a\"b\n2,\"c\"d\ne\",f\n3,\"x\"\n4,y\"\"\n\"z\"\r\n",
		"a,\"b\"\r\r\n\"c\"\r,d\n\"\"\"\n\"\n,,\n,\n",
		"x\n\"unterminated\n,\n",
		"x\n'esc at the end\\",
		"a long unquoted field,b\n",
	} {
		checkTokenizer(t, []byte(text))
	}
}

func FuzzTokenizer(f *testing.F) {
	f.Add([]byte("id,name\n1,\"a\nb\"\n2,x\n"))
	f.Add([]byte("#\"\n'a\\'b';\"c\"\"\"\r\n\r\n"))
	f.Fuzz(func(t *testing.T, text []byte) {
		if len(text) > 1<<12 {
			return
		}
		checkTokenizer(t, text)
	})
}

// BenchmarkTokenizer splits a text of short, quoted and unquoted fields into records, with the
// tokenizer before (ref) and after (new) record(). Bytes are the text's.
func BenchmarkTokenizer(b *testing.B) {
	var buf bytes.Buffer
	buf.WriteString("id,name,price,ts,ok,score\n")
	for i := 0; buf.Len() < 8<<20; i++ {
		fmt.Fprintf(&buf, "%d,\"customer %d, ltd\",%d.%02d,2024-01-02T03:04:%02d.123456Z,%t,%d.25\n", i, i, i%100000, i%100, i%60, i%2 == 0, i)
	}
	text := buf.Bytes()
	d, err := CSVOptions{}.resolve("f.csv")
	if err != nil {
		b.Fatal(err)
	}
	for range 3 {
		b.Run("ref", func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			defer reportCPU(b)()
			for b.Loop() {
				t := &refTokenizer{br: bufio.NewReaderSize(bytes.NewReader(text), 256<<10), delim: d.delim, quote: d.quote, max: d.maxRecord()}
				for {
					if _, err := t.next(); err != nil {
						break
					}
				}
			}
		})
		b.Run("new", func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			defer reportCPU(b)()
			for b.Loop() {
				t := d.tokenizer(bytes.NewReader(text))
				for {
					if _, err := t.next(); err != nil {
						break
					}
				}
			}
		})
	}
}

// reportCPU reports the process's CPU time per iteration (user and system, all threads) as
// "cpu-ns/op" when the func it returns is called: less noisy than wall time on a shared machine.
func reportCPU(b *testing.B) func() {
	start := cpuNow(b)
	return func() { b.ReportMetric(float64(cpuNow(b)-start)/float64(b.N), "cpu-ns/op") }
}

func cpuNow(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
