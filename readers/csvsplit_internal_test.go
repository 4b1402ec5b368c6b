package readers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// wantBound is where the tokenizer, reading text (after a BOM) from its start, stops with limit
// target: unit start B for that nominal start, or the tokenizer's syntax error on the way.
func wantBound(t *testing.T, d *dialect, text []byte, bom int64, header bool, target int64) (csvBound, error) {
	t.Helper()
	tk := d.tokenizer(bytes.NewReader(text[bom:]))
	tk.off = bom
	if header {
		if _, err := tk.next(); err != nil && !errors.Is(err, io.EOF) {
			return csvBound{}, err
		}
	}
	tk.limit = target
	for {
		_, err := tk.next()
		if errors.Is(err, io.EOF) {
			line := tk.line
			if tk.partial {
				line--
			}
			return csvBound{off: tk.off, line: line}, nil
		}
		if err != nil {
			return csvBound{}, err
		}
	}
}

// scanDialects are the dialects checkScan tries.
var scanDialects = []CSVOptions{
	{},
	{Comment: '#'},
	{LazyQuotes: true},
	{Delimiter: ';', Quote: '\'', Escape: '\\'},
	{Delimiter: ';', Quote: '\'', Escape: '\\', LazyQuotes: true, Comment: '#'},
	{Escape: '"'},
	{NoQuote: true, Comment: '#'},
	{Delimiter: '|', Escape: '\r'},
	{Comment: '"', LazyQuotes: true},
}

// checkScan compares, for every nominal start, the unit start csvSplit's scan finds (in windows of
// several sizes, so that lookahead and lookbehind cross window edges) with where the tokenizer
// stops.
func checkScan(t *testing.T, text []byte) {
	checkScanUnits(t, text, []int64{1, 7}, []int{3, 4, 7, 1 << 10})
}

// checkScanUnits is checkScan with units of the given nominal sizes, scanned in windows of the given
// sizes.
func checkScanUnits(t *testing.T, text []byte, units []int64, windows []int) {
	path := filepath.Join(t.TempDir(), "f.csv")
	if err := os.WriteFile(path, text, 0o644); err != nil {
		t.Fatal(err)
	}
	var bom int64
	if bytes.HasPrefix(text, utf8BOM) {
		bom = 3
	}
	size := int64(len(text))
	if size < 2 {
		return
	}
	for _, o := range scanDialects {
		o.MaxRecordBytes = 1 << 30 // the scan knows no limit; nor should the tokenizer here
		d, err := o.resolve(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, header := range []bool{true, false} {
			for _, unitBytes := range units {
				starts := csvUnitStarts(size, unitBytes)
				want := make([]csvBound, len(starts))
				wantErr := make([]error, len(starts))
				for k := 1; k < len(starts); k++ {
					want[k], wantErr[k] = wantBound(t, d, text, bom, header, starts[k])
				}
				for _, window := range windows {
					for _, reach := range []bool{false, true} {
						sp := newCSVSplit(path, d, starts, bom, header)
						sp.window = window
						if window == 3 {
							sp.step = 5 // a heartbeat every few windows
						}
						if reach {
							// Points decoders of some units have reached: record boundaries (past
							// the header, as wantBound's are) before the next unit's nominal start.
							for j := 0; j+1 < len(starts); j += 2 {
								b, err := wantBound(t, d, text, bom, header, starts[j]+unitBytes/2)
								if err == nil && b.off < starts[j+1] {
									sp.reach(j, b)
								}
							}
						}
						st := &stepper{}
						for k := len(starts) - 1; k >= 1; k -= 1 + k%3 { // some in reverse, skipping some
							got, err := sp.start(context.Background(), st, k, func() error { return nil })
							switch {
							case wantErr[k] != nil:
								var re *RowError
								var se *syntaxError
								if !errors.As(err, &re) || !errors.As(wantErr[k], &se) || re.Line != se.line || re.Reason != se.reason {
									t.Fatalf("%+v header %v units %d window %d reach %v: start(%d) = %v, %v; want the tokenizer's error %v\n%q", o, header, unitBytes, window, reach, k, got, err, wantErr[k], text)
								}
							case err != nil || got != want[k]:
								t.Fatalf("%+v header %v units %d window %d reach %v: start(%d) = %+v, %v; want %+v\n%q", o, header, unitBytes, window, reach, k, got, err, want[k], text)
							}
						}
					}
				}
			}
		}
	}
}

func TestCSVScanMatchesTokenizer(t *testing.T) {
	for _, text := range []string{
		"id,name\n1,\"a\nb\"\n2,\"c,\"\"d\"\"\ne\nf\"\n3,\"\n\"\n4,plain\n5,\"\"\n",
		"id,name\r\n1,\"a\r\nb\"\r\n2,x\r\n\r\n3,\"\r\n\r\n\"\r\n",
		"\xEF\xBB\xBF\"id\",name\n1,a\n2,\"b\nc\"",
		"# \"a comment\n\nid,name\n\n#\"\n1,a\n\n\n# x,\"y\n2,\"#\n\"\n#\n3,c\n",
		"id;name\n1;'it\\'s'\n2;'a\\\nb'\n3;'\\\\'\n4;'x\\'\ny'\n5;'a''b'\n",
		"id,name\n1,a\"b\n2,\"c\"d\ne\",f\n3,\"x\"\n4,y\"\"\n\"z\"\r\n",
		"a,\"b\"\r\r\n\"c\"\r,d\n\"\"\"\n\"\n",
		"x\n\"unterminated\n,\n",
		"x\n'esc at the end\\",
		"1,\"a\",x,\"b\nc\"\n2,d\n3,\"e\",\"f\ng\",h\n",
	} {
		checkScan(t, []byte(text))
	}
}

// TestCSVScanLongMatchesTokenizer checks the scan on longer texts than checkScan's, in windows that
// end inside long fields: random records of plain, quoted, doubled-quote, multi-line and empty
// fields, CRLF and blank lines, some with a quote the tokenizer stops at.
func TestCSVScanLongMatchesTokenizer(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	fields := []string{"a", "12345", "", "\"x,y\"", "\"say \"\"hi\"\"\"", "\"two\nlines\"", "\"crlf\r\nin\"", "\"\"", "\"\"\"\"", "tail\r", "\"\n\"", "\"a\"\"\"\"b\"",
		"\"" + strings.Repeat("a long, quoted\nfield ", 12) + "\"", "\"" + strings.Repeat("x\"\",\n", 40) + "\""}
	bad := []string{"x\"y", "\"a\"b", "\"a\"\rb", "\"a\" "}
	for n := range 16 {
		var text bytes.Buffer
		text.WriteString("h1,h2,h3\n")
		for text.Len() < 1000+n*150 {
			if rng.IntN(20) == 0 {
				text.WriteString([]string{"\n", "\r\n"}[rng.IntN(2)]) // a blank line
			}
			for f := range 3 {
				if f > 0 {
					text.WriteByte(',')
				}
				text.WriteString(fields[rng.IntN(len(fields))])
			}
			if n%4 == 3 && rng.IntN(40) == 0 {
				text.WriteString("," + bad[rng.IntN(len(bad))])
			}
			text.WriteString([]string{"\n", "\r\n"}[rng.IntN(2)])
		}
		if n%2 == 1 {
			text.Truncate(text.Len() - 1 - rng.IntN(10)) // end anywhere
		}
		checkScanUnits(t, text.Bytes(), []int64{61, 257}, []int{67, 1 << 10})
	}
}

func FuzzCSVScan(f *testing.F) {
	f.Add([]byte("id,name\n1,\"a\nb\"\n2,x\n"))
	f.Add([]byte("#\"\n'a\\'b';\"c\"\"\"\r\n\r\n"))
	f.Fuzz(func(t *testing.T, text []byte) {
		if len(text) > 200 {
			return
		}
		checkScan(t, text)
	})
}

// TestCSVSplitBeats checks that a unit whose start is far gets heartbeats while it is scanned for,
// and that two ways of finding a start that disagree fail rather than lose or repeat rows.
func TestCSVSplitBeats(t *testing.T) {
	text := bytes.Repeat([]byte("1,\"a\nb\"\n"), 100)
	path := filepath.Join(t.TempDir(), "f.csv")
	if err := os.WriteFile(path, text, 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := CSVOptions{}.resolve(path)
	if err != nil {
		t.Fatal(err)
	}
	starts := csvUnitStarts(int64(len(text)), 100)
	sp := newCSVSplit(path, d, starts, 0, true)
	sp.window, sp.step = 16, 64
	beats := 0
	last := len(starts) - 1
	got, err := sp.start(context.Background(), &stepper{}, last, func() error { beats++; return nil })
	if want := (csvBound{off: 8 * 88, line: 2 * 88}); err != nil || got != want {
		t.Fatalf("start(%d) = %+v, %v; want %+v", last, got, err, want)
	}
	if min := len(text)*(last)/len(starts)/64 - 1; beats < min {
		t.Errorf("%d heartbeats scanning %d bytes in steps of 64; want at least %d", beats, starts[last], min)
	}
	if err := sp.found(last, csvBound{off: got.off + 8, line: got.line + 2}); !errors.Is(err, errSplitMismatch) {
		t.Errorf("found(%d, another start) = %v; want errSplitMismatch", last, err)
	}
	if err := sp.found(last, got); err != nil {
		t.Errorf("found(%d, the same start) = %v", last, err)
	}
}

// BenchmarkCSVScan scans a file of quoted and unquoted fields for its unit starts. Bytes are the
// file's size.
func BenchmarkCSVScan(b *testing.B) {
	var buf bytes.Buffer
	buf.WriteString("id,name,price,ts,ok,score\n")
	for i := 0; buf.Len() < 32<<20; i++ {
		fmt.Fprintf(&buf, "%d,\"customer %d, ltd\",%d.%02d,2024-01-02T03:04:%02d.123456Z,%t,%d.25\n", i, i, i%100000, i%100, i%60, i%2 == 0, i)
	}
	path := filepath.Join(b.TempDir(), "f.csv")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
	d, err := CSVOptions{}.resolve(path)
	if err != nil {
		b.Fatal(err)
	}
	starts := csvUnitStarts(int64(buf.Len()), 1<<20)
	b.SetBytes(int64(buf.Len()))
	b.ReportAllocs()
	defer reportCPU(b)()
	for b.Loop() {
		sp := newCSVSplit(path, d, starts, 0, true)
		if _, err := sp.start(context.Background(), &stepper{}, len(starts)-1, func() error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}
