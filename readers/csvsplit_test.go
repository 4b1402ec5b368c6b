package readers_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/readers"
	"github.com/loaderproject/loader/tableschema"
)

// csvRead is what reading a CSV file gives: its rows, the bad rows handed to OnBadRow, and the
// first error.
type csvRead struct {
	rows []string
	bad  []string
	err  string
}

func (r csvRead) String() string {
	return fmt.Sprintf("rows:\n  %s\nbad rows:\n  %s\nerror: %s", strings.Join(r.rows, "\n  "), strings.Join(r.bad, "\n  "), r.err)
}

// errText renders an error for comparing reads: a *RowError by its fields (which name the file
// and line, never the unit), anything else by its text without the unit.
func errText(err error) string {
	var re *readers.RowError
	if errors.As(err, &re) {
		return fmt.Sprintf("RowError{%s line %d column %q: %s}", filepath.Base(re.File), re.Line, re.Column, re.Reason)
	}
	if err == nil {
		return ""
	}
	return err.Error()
}

// How readSplit reads the units.
const (
	inOrder    = "in order"               // one after the other on one source
	freshEach  = "each on a fresh source" // so every unit's start is scanned for
	reverse    = "in reverse order"       // on one source
	concurrent = "all at once"            // on one source
	nested     = "while unit 0 is read"   // the others, from its first batch's callback
)

// readSplit reads path in units of about unitBytes (0: the default policy) in the given way,
// with the rows and bad rows in file order and the first error in unit order.
func readSplit(t *testing.T, path string, table *tableschema.Schema, o readers.CSVOptions, unitBytes, batchBytes int64, how string) (csvRead, int) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	var mu sync.Mutex
	bad := map[int][]string{} // by unit, for reads where units overlap
	unit := -1                // the unit being read, when they do not
	withBad := o.OnBadRow != nil
	open := func(unitOf func() int) (readers.Source, error) {
		opts := []readers.Option{readers.WithAllocator(mem), readers.WithBatchBytes(batchBytes), readers.WithCSVUnitBytes(unitBytes)}
		oo := o
		if withBad {
			oo.OnBadRow = func(b readers.BadRow) error {
				mu.Lock()
				defer mu.Unlock()
				k := unitOf()
				bad[k] = append(bad[k], fmt.Sprintf("line %d column %q: %s [%s]", b.Line, b.Column, b.Reason, strings.Join(b.Fields, "|")))
				return nil
			}
		}
		opts = append(opts, readers.WithCSV(oo))
		if table != nil {
			opts = append(opts, readers.WithTable(table))
		}
		return readers.Open(context.Background(), readers.File{Path: path}, opts...)
	}
	var out csvRead
	src, err := open(func() int { return unit })
	if err != nil {
		out.err = errText(err)
		return out, 0
	}
	defer src.Close()
	units := src.Units()
	rows := make([][]string, len(units))
	errs := make([]error, len(units))
	read := func(src readers.Source, k int) {
		errs[k] = src.ReadUnit(context.Background(), k, func(rec arrow.RecordBatch) error {
			rows[k] = append(rows[k], rowsOf(rec)...)
			return nil
		})
	}
	switch how {
	case inOrder, reverse:
		order := make([]int, len(units))
		for k := range order {
			order[k] = k
		}
		if how == reverse {
			slices.Reverse(order)
		}
		for _, k := range order {
			unit = k
			read(src, k)
		}
	case freshEach:
		for k := range units {
			unit = k
			one, err := open(func() int { return unit })
			if err != nil {
				t.Fatalf("Open again = %v", err)
			}
			read(one, k)
			one.Close()
		}
	case nested:
		// Their starts are scanned for from the points unit 0's decoder has reached.
		unit = 0
		first := true
		others := func() {
			first = false
			for k := 1; k < len(units); k++ {
				unit = k
				read(src, k)
			}
			unit = 0
		}
		errs[0] = src.ReadUnit(context.Background(), 0, func(rec arrow.RecordBatch) error {
			rows[0] = append(rows[0], rowsOf(rec)...)
			if first {
				others()
			}
			return nil
		})
		if first { // unit 0 had no rows
			others()
		}
	case concurrent:
		// Overlapping units cannot say whose bad row it is: OnBadRow gets the rows in an order
		// sorted afterwards by line (each bad row has its own).
		var wg sync.WaitGroup
		for k := range units {
			wg.Go(func() { read(src, k) })
		}
		wg.Wait()
	}
	for k := range units {
		out.rows = append(out.rows, rows[k]...)
		out.bad = append(out.bad, bad[k]...)
		if errs[k] != nil {
			out.err = errText(errs[k])
			break
		}
	}
	if how == concurrent {
		out.bad = bad[-1]
		slices.SortFunc(out.bad, func(a, b string) int {
			var la, lb int
			fmt.Sscanf(a, "line %d", &la)
			fmt.Sscanf(b, "line %d", &lb)
			return la - lb
		})
		if out.err != "" { // bad rows after the failing unit's may have been handed over
			out.bad = nil
		}
	}
	return out, len(units)
}

// csvSplitCases are files whose records span lines, with every kind of line the tokenizer knows.
var csvSplitCases = []struct {
	name    string
	file    string
	content string
	opts    readers.CSVOptions
	typed   bool // parse into csvSplitTable rather than infer
}{
	{
		name:    "quoted newlines, delimiters and doubled quotes",
		content: "id,name\n1,\"a\nb\"\n2,\"c,\"\"d\"\"\ne\nf\"\n3,\"\n\"\n4,plain\n5,\"\"\n",
	},
	{
		name:    "quoted fields after quoted fields, spanning lines",
		content: "id,name,x\n1,\"a\",\"b\nc\"\n2,d,\"e\"\n3,\"f\",\"\n\"\n",
	},
	{
		name:    "CRLF, also inside quotes",
		content: "id,name\r\n1,\"a\r\nb\"\r\n2,x\r\n\r\n3,\"\r\n\r\n\"\r\n",
	},
	{
		name:    "BOM, no line end at the end",
		content: "\xEF\xBB\xBFid,name\n1,a\n2,\"b\nc\"",
	},
	{
		name:    "quoted last field at the very end",
		content: "id,name\n1,a\n2,\"b\"",
	},
	{
		name:    "blank and comment lines, quotes in comments",
		content: "# \"a comment\n\nid,name\n\n#\"\n1,a\n\n\n# x,\"y\n2,\"#\n\"\n#\n3,c\n",
		opts:    readers.CSVOptions{Comment: '#'},
	},
	{
		name:    "a header spanning lines",
		content: "\"id\",\"na\nme\"\n1,a\n2,b\n3,c\n",
	},
	{
		name:    "escapes, an escaped quote and an escaped line end",
		content: "id;name\n1;'it\\'s'\n2;'a\\\nb'\n3;'\\\\'\n4;'x\\'\ny'\n",
		opts:    readers.CSVOptions{Delimiter: ';', Quote: '\'', Escape: '\\'},
	},
	{
		name:    "lazy quotes",
		content: "id,name\n1,a\"b\n2,\"c\"d\ne\",f\n3,\"x\"\n4,y\"\"\n",
		opts:    readers.CSVOptions{LazyQuotes: true, AllowRagged: true},
	},
	{
		name:    "no quoting",
		content: "id,name\n1,\"a\n2,b\"\n3,\"\"\n",
		opts:    readers.CSVOptions{NoQuote: true},
	},
	{
		name:    "no header, ragged rows",
		content: "1,\"a\nb\"\n2\n\n3,c\n4,\"d\"\n",
		opts:    readers.CSVOptions{NoHeader: true, AllowRagged: true, Columns: []string{"id", "name"}},
	},
	{
		name:    "tab-separated",
		file:    "f.tsv",
		content: "id\tname\n1\t\"a\tb\nc\"\n2\tx\n",
	},
	{
		name:    "bad rows near every boundary",
		typed:   true,
		content: "id,name\n1,a\nx,\"b\nc\"\n3,c,extra\n4,\"d\"\n5\n\"6\",\"e\nf\"\n7,g\nbad,h\n",
		opts:    readers.CSVOptions{OnBadRow: func(readers.BadRow) error { return nil }},
	},
	{
		name:    "a bad value fails the read at its line",
		typed:   true,
		content: "id,name\n1,\"a\nb\"\n2,b\nSECRET,c\n4,d\n5,e\n",
	},
	{
		name:    "an unterminated quote",
		content: "id,name\n1,a\n2,\"b\n3,c\n4,d\n",
		opts:    readers.CSVOptions{InferRows: 1}, // the sample holds no error, so Open passes
	},
	{
		name:    "a quote inside an unquoted field",
		content: "id,name\n1,a\n2,b\"c\n3,\"d\"\n4,e\n",
		opts:    readers.CSVOptions{InferRows: 1}, // the sample holds no error, so Open passes
	},
	{
		name:    "text after a closing quote",
		content: "id,name\n1,a\n2,\"c\"\n3,\"a\nb\"x\n4,d\n",
		opts:    readers.CSVOptions{InferRows: 1}, // the sample holds no error, so Open passes
	},
	{
		name:    "a record over the record limit",
		content: "id,name\n1,a\n2,\"b\nc\"\n3,\"" + strings.Repeat("c", 150) + "\n\"\n4,d\n",
		opts:    readers.CSVOptions{MaxRecordBytes: 100, InferRows: 1},
	},
	{
		name:    "only a header",
		content: "id,name\n",
	},
	{
		name:    "only blank lines after the header",
		content: "id,name\n\n\r\n\n",
	},
}

var csvSplitTable = "id BIGINT, name STRING"

// TestCSVSplitMatchesWhole checks that a CSV file cut into units anywhere, read in any order,
// gives the rows, bad rows (with their lines) and errors of the whole file read as one unit.
func TestCSVSplitMatchesWhole(t *testing.T) {
	table, err := tableschema.ParseColumns(csvSplitTable)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range csvSplitCases {
		t.Run(tt.name, func(t *testing.T) {
			name := tt.file
			if name == "" {
				name = "f.csv"
			}
			path := filepath.Join(t.TempDir(), name)
			if err := os.WriteFile(path, []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			var tbl *tableschema.Schema
			if tt.typed {
				tbl = table
			}
			// Rows parsed before an error in the same batch are not handed over: with an error, read
			// a row a batch, so that every row before it is.
			batchBytes := int64(64)
			whole, n := readSplit(t, path, tbl, tt.opts, 0, batchBytes, inOrder)
			if whole.err != "" {
				batchBytes = 1
				whole, n = readSplit(t, path, tbl, tt.opts, 0, batchBytes, inOrder)
			}
			if n != 1 {
				t.Fatalf("the whole file read in %d units; want 1", n)
			}
			if tt.opts.OnBadRow != nil && len(whole.bad) == 0 {
				t.Fatalf("no bad rows in the whole read; the case tests none")
			}
			for _, unitBytes := range []int64{1, 2, 3, 5, 8, 13, 21} {
				for _, how := range []string{inOrder, freshEach, reverse, concurrent, nested} {
					got, n := readSplit(t, path, tbl, tt.opts, unitBytes, batchBytes, how)
					if n < 2 && int64(len(tt.content)) >= 2*unitBytes {
						t.Fatalf("units of %d bytes: %d units; want several", unitBytes, n)
					}
					if (how == reverse || how == nested) && whole.err != "" {
						continue // units after the error are read first, and fail with it
					}
					if got.String() != whole.String() {
						t.Errorf("units of %d bytes read %s:\n%s\nwant, as one unit:\n%s", unitBytes, how, got, whole)
					}
				}
			}
		})
	}
}

// TestCSVSplitUnitsStable checks that a file maps each unit to the same rows however its units are
// read and on every Open, as a resume needs: the manifest names rows by unit and row in the unit.
func TestCSVSplitUnitsStable(t *testing.T) {
	var b strings.Builder
	b.WriteString("id,name\n")
	for i := range 300 {
		switch i % 3 {
		case 0:
			fmt.Fprintf(&b, "%d,\"line\n%d\"\n", i, i)
		case 1:
			fmt.Fprintf(&b, "%d,\"a \"\"quote\"\", a delimiter\"\r\n", i)
		default:
			fmt.Fprintf(&b, "%d,plain\n\n", i)
		}
	}
	path := filepath.Join(t.TempDir(), "f.csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	perUnit := func(order []int) ([]readers.Unit, [][]string) {
		src, err := readers.Open(context.Background(), readers.File{Path: path}, readers.WithAllocator(mem), readers.WithCSVUnitBytes(400))
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		units := src.Units()
		if order == nil {
			order = []int{}
			for k := len(units) - 1; k >= 0; k-- {
				order = append(order, k)
			}
		}
		rows := make([][]string, len(units))
		for _, k := range order {
			if err := src.ReadUnit(context.Background(), k, func(rec arrow.RecordBatch) error {
				rows[k] = append(rows[k], rowsOf(rec)...)
				return nil
			}); err != nil {
				t.Fatalf("ReadUnit(%d) = %v", k, err)
			}
		}
		return units, rows
	}
	units, first := perUnit(nil) // last unit first: every start is scanned for
	if len(units) < 10 {
		t.Fatalf("%d units; want at least 10", len(units))
	}
	var total int64
	for k, u := range units {
		if u.Index != k || u.Rows != -1 || u.Bytes <= 0 {
			t.Errorf("Units()[%d] = %+v; want index %d, rows -1, some bytes", k, u, k)
		}
		total += u.Bytes
	}
	if st, _ := os.Stat(path); total != st.Size() {
		t.Errorf("units hold %d bytes; want the file's %d", total, st.Size())
	}
	order := []int{3, 0, 7, 1, 2}
	for k := range units {
		if !slices.Contains(order, k) {
			order = append(order, k)
		}
	}
	units2, second := perUnit(order) // as a resume might: some units, in another order
	if !slices.Equal(units, units2) {
		t.Errorf("Units() = %v on a second Open; want %v", units2, units)
	}
	var all []string
	for k := range units {
		if !slices.Equal(first[k], second[k]) {
			t.Errorf("unit %d = %q on a second Open; want %q", k, second[k], first[k])
		}
		all = append(all, first[k]...)
	}
	if len(all) != 300 || all[0] != "0|line\n0" || all[299] != "299|plain" {
		t.Errorf("rows = %d (%q ... %q); want 300, 0 to 299", len(all), all[0], all[len(all)-1])
	}
}

// TestCSVSplitPolicy checks the unit count the default policy gives by file size, and that
// compressed files stay one unit.
func TestCSVSplitPolicy(t *testing.T) {
	dir := t.TempDir()
	row := "1,\"a, b\"\n"
	for _, tt := range []struct {
		name  string
		size  int64
		units int
	}{
		{"under twice the minimum unit", 32<<20 - 1, 1},
		{"twice the minimum unit", 32 << 20, 2},
		{"10 units of 16 MiB", 160 << 20, 10},
		{"16 units of 64 MiB", 1 << 30, 16},
		{"64 MiB units past 1 GiB", 2 << 30, 32},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, "f.csv")
			if err := os.WriteFile(path, []byte("id,name\n"+row), 0o644); err != nil {
				t.Fatal(err)
			}
			// A sparse tail: the size is what counts, the rows need not be real.
			if err := os.Truncate(path, tt.size); err != nil {
				t.Fatal(err)
			}
			src, err := readers.Open(context.Background(), readers.File{Path: path}, readers.WithCSV(readers.CSVOptions{InferRows: 1}))
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			units := src.Units()
			if len(units) != tt.units {
				t.Fatalf("Units() of a file of %d bytes = %d units; want %d", tt.size, len(units), tt.units)
			}
			var total int64
			for _, u := range units {
				total += u.Bytes
				if d := u.Bytes - tt.size/int64(tt.units); d < -1 || d > 1 {
					t.Errorf("unit %d has %d bytes; want %d", u.Index, u.Bytes, tt.size/int64(tt.units))
				}
			}
			if total != tt.size {
				t.Errorf("units hold %d bytes; want %d", total, tt.size)
			}
		})
	}
	var big strings.Builder
	big.WriteString("id,name\n")
	for big.Len() < 2000 {
		big.WriteString(row)
	}
	for _, c := range []struct {
		name string
		data []byte
	}{{"f.csv.gz", gz([]byte(big.String()))}, {"f.csv.zst", zst([]byte(big.String()))}} {
		path := filepath.Join(dir, c.name)
		if err := os.WriteFile(path, c.data, 0o644); err != nil {
			t.Fatal(err)
		}
		src := openDiscovered(t, path, readers.WithCSVUnitBytes(10))
		if n := len(src.Units()); n != 1 {
			t.Errorf("Units() of %s = %d; want 1 (a compressed file is one unit)", c.name, n)
		}
		src.Close()
	}
}

// TestCSVSplitCancelled checks that a unit whose start must be scanned for returns at once on a
// cancelled context, and names the file and unit.
func TestCSVSplitCancelled(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.csv")
	if err := os.WriteFile(path, []byte("id,name\n1,a\n2,b\n3,c\n4,d\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	src, err := readers.Open(context.Background(), readers.File{Path: path}, readers.WithAllocator(mem), readers.WithCSVUnitBytes(4))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	last := len(src.Units()) - 1
	err = src.ReadUnit(ctx, last, func(arrow.RecordBatch) error { return nil })
	var fe *readers.FileError
	if !errors.Is(err, context.Canceled) || !errors.As(err, &fe) || fe.Unit != last || fe.Path != path {
		t.Errorf("ReadUnit(cancelled, %d) = %v; want context.Canceled in a *FileError for unit %d", last, err, last)
	}
	if err := src.ReadUnit(context.Background(), last+1, func(arrow.RecordBatch) error { return nil }); err == nil {
		t.Errorf("ReadUnit(%d) of %d units = nil; want an error", last+1, last+1)
	}
}

// FuzzCSVSplit checks that arbitrary text in several dialects, cut into units of any size, reads
// as it does as one unit: the same rows, bad rows and first error.
func FuzzCSVSplit(f *testing.F) {
	for _, c := range csvSplitCases {
		f.Add([]byte(c.content), uint8(0), uint8(3))
	}
	f.Add([]byte("id;name\n1;'a\\'\nb'\n#';x\n2;'c''d'\n"), uint8(2|4), uint8(1))
	f.Add([]byte("1,\"a\"\"\n\"\"b\"\n\n2,\"\r\n\"\r\n"), uint8(8|16), uint8(2))
	f.Add([]byte("a,b\n\"x\"y\",z\n1,\"2\n"), uint8(4), uint8(5))
	f.Fuzz(func(t *testing.T, data []byte, flags, unit uint8) {
		if len(data) > 512 {
			return
		}
		path := filepath.Join(t.TempDir(), "f.csv")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		o := readers.CSVOptions{MaxRecordBytes: 64, InferRows: 2}
		fuzzDialect(&o, flags)
		if flags&16 != 0 {
			o.OnBadRow = func(readers.BadRow) error { return nil }
		}
		if flags&32 != 0 {
			o.NoQuote = true
		}
		var table *tableschema.Schema
		if flags&1 != 0 {
			var err error
			if table, err = tableschema.ParseColumns(csvSplitTable); err != nil {
				t.Fatal(err)
			}
		}
		unitBytes := 1 + int64(unit%32)
		whole, _ := readSplit(t, path, table, o, 0, 1, inOrder)
		hows := []string{inOrder, freshEach}
		if whole.err == "" {
			hows = append(hows, reverse)
		}
		for _, how := range hows {
			if got, _ := readSplit(t, path, table, o, unitBytes, 1, how); got.String() != whole.String() {
				t.Fatalf("units of %d bytes read %s:\n%s\nwant, as one unit:\n%s", unitBytes, how, got, whole)
			}
		}
	})
}

// TestCSVSplitPipe checks that a CSV file that can only be read in order (a named pipe) stays one
// unit, read as a stream.
func TestCSVSplitPipe(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "p.csv")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("no named pipes here: %v", err)
	}
	// Open reads the header and sample, ReadUnit the whole text: a writer each, one after the other.
	opened := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 2 {
			if i == 1 {
				<-opened
			}
			w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
			if err != nil {
				return
			}
			w.WriteString("\xEF\xBB\xBFid,name\n1,\"a\nb\"\n2,c\n")
			w.Close()
		}
	}()
	defer func() {
		// A reader, so a writer still waiting to open (the test failed early) goes on.
		if r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			defer r.Close()
		}
		<-done
	}()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	src, err := readers.Open(context.Background(), readers.File{Path: fifo, Format: readers.FormatCSV}, readers.WithAllocator(mem), readers.WithCSVUnitBytes(4))
	close(opened)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if n := len(src.Units()); n != 1 {
		t.Fatalf("Units() of a pipe = %d; want 1", n)
	}
	var rows []string
	if err := src.ReadUnit(context.Background(), 0, func(rec arrow.RecordBatch) error {
		rows = append(rows, rowsOf(rec)...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rows, ","); got != "1|a\nb,2|c" {
		t.Errorf("rows = %q; want 1|a\\nb,2|c", got)
	}
}
