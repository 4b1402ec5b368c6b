package load_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/embedded"
	"github.com/loaderproject/loader/internal/corpus"
	"github.com/loaderproject/loader/internal/fixture"
	"github.com/loaderproject/loader/load"
	"github.com/loaderproject/loader/readers"
	"github.com/loaderproject/loader/tableschema"
	"github.com/loaderproject/loader/warehouse"
)

// TestCorpusLoadsLikeArrowGo loads every valid corpus file into a table created like it (as `loader
// table create --like` does) through the embedded sink, reads the table back and compares it, value
// by value and nulls included, with what arrow-go's plain readers read from the file, normalised by
// fixture.Canonical (which does not use schemamatch, the code under test).
//
// Refusals by design are checked too: a column no Delta type holds must be refused naming the column
// (the file's other columns are then loaded and compared, the rest going to a rescue column); column
// names Delta cannot take (refusedNames) and values breaking their own declared type (refusedValues)
// are refused naming them. Valid files arrow-go cannot read (corpus.KnownUnreadable) must fail naming
// the file. The cleanup logs which files ended how.
func TestCorpusLoadsLikeArrowGo(t *testing.T) {
	files := corpus.Valid(t)
	var (
		mu       sync.Mutex
		outcomes = map[string][]string{}
	)
	note := func(kind, name string) {
		mu.Lock()
		outcomes[kind] = append(outcomes[kind], name)
		mu.Unlock()
	}
	t.Cleanup(func() {
		kinds := make([]string, 0, len(outcomes))
		for k := range outcomes {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		for _, k := range kinds {
			sort.Strings(outcomes[k])
			t.Logf("%s (%d): %s", k, len(outcomes[k]), strings.Join(outcomes[k], " "))
		}
	})
	for _, f := range files {
		t.Run(f.Name(), func(t *testing.T) {
			t.Parallel()
			note(loadCorpusFile(t, f), f.Name())
		})
	}
}

// refusedNames lists valid files whose column names no Delta table can take (tableschema allows
// ASCII letters, digits and underscores, unique case-insensitively), with a name the refusal must
// quote.
var refusedNames = map[string]string{
	"generated_duplicate_fieldnames.arrow_file": `column "ints" duplicates "ints"`, // and a struct's unnamed fields
	"generated_duplicate_fieldnames.stream":     `column "ints" duplicates "ints"`,
	"delta_encoding_required_column.parquet":    `column name "c_customer_sk:"`, // every name ends in ':'
}

// refusedValues lists files whose values break their own schema, so the load must refuse them naming
// the file and saying why. arrow-testing's generated_decimal holds values with more digits than their
// column's declared precision (12810 in decimal(3,2), for one).
var refusedValues = map[string]string{
	"generated_decimal.arrow_file": `column "f0" row 0: value has more digits than DECIMAL(3,2) holds`,
	"generated_decimal.stream":     `column "f0" row 0: value has more digits than DECIMAL(3,2) holds`,
}

// loadCorpusFile runs one file and returns the outcome for the summary.
func loadCorpusFile(t *testing.T, f corpus.File) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer func() {
		if n := mem.CurrentAlloc(); n != 0 && corpus.PlainLeaks(f.Path, f.Format) {
			t.Logf("%d bytes still allocated after the load: arrow-go's own reader leaks on this file", n)
			return
		}
		mem.AssertSize(t, 0)
	}()
	dir := t.TempDir()
	cfg := load.Config{
		Sources: []string{f.Path},
		Table:   table,
		Target:  embedded.New(dir, embedded.WithCommitInterval(10*time.Millisecond)),
		// One decoder and one stream deliver the rows in file order, and the sink commits them in
		// arrival order: the table can be compared with the file row by row.
		Streams:       1,
		Connections:   1,
		Decoders:      1,
		MaxFrameBytes: 64 << 10, // several frames from the larger files
		ManifestDir:   t.TempDir(),
		Allocator:     mem,
	}
	why, unreadable := corpus.KnownUnreadable[f.Name()]

	// The table, as `table create --like` derives it.
	src, err := readers.Open(ctx, readers.File{Path: f.Path, Format: f.Format})
	if err != nil {
		if !unreadable {
			t.Fatalf("readers.Open = %v", err)
		}
		// --create-table reads the schema the same way and must fail the same way.
		cfg.CreateTable = true
		checkUnreadable(t, ctx, cfg, f, why)
		return "unreadable (at open)"
	}
	srcSchema := src.Schema()
	src.Close()
	schema, err := tableschema.FromArrow(srcSchema)
	outcome := "loaded, equal to arrow-go"
	var rescued []string // source columns sent to the rescue column
	if errors.Is(err, tableschema.ErrNoDeltaType) {
		checkNoDeltaType(t, err, srcSchema)
		// The other columns still load, into a table of them plus a rescue column that takes the
		// columns without a Delta type as JSON.
		if schema, rescued = holdable(srcSchema); schema == nil {
			return "refused: no Delta type (and no other column)"
		}
		cfg.RescueColumn = rescueColumn
		outcome = "refused: no Delta type; the other columns loaded with a rescue column, equal to arrow-go"
		err = nil
	}
	if want, ok := refusedNames[f.Name()]; ok {
		if !errors.Is(err, tableschema.ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Fatalf("tableschema.FromArrow = %v; want ErrInvalid naming %s", err, want)
		}
		return "refused: column names Delta cannot hold"
	}
	if err != nil {
		t.Fatalf("tableschema.FromArrow(%s) = %v", srcSchema, err)
	}
	wh, err := warehouse.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wh.CreateTable(ctx, table, schema); err != nil {
		t.Fatalf("CreateTable(%s) = %v", schema.SQL(), err)
	}
	if unreadable {
		checkUnreadable(t, ctx, cfg, f, why)
		return "unreadable (while loading)"
	}

	sum, err := load.Run(ctx, cfg)
	if want, ok := refusedValues[f.Name()]; ok {
		if err == nil || !strings.Contains(err.Error(), f.Path) || !strings.Contains(err.Error(), want) {
			t.Fatalf("load.Run = %v; want an error naming the file and saying %q", err, want)
		}
		return "refused: values outside their declared type"
	}
	if err != nil {
		t.Fatalf("load.Run = %v", err)
	}
	got := scan(t, dir)
	var rescues []map[string]json.RawMessage
	if rescued != nil {
		schema.Fields = schema.Fields[:len(schema.Fields)-1]
		rescues = takeRescued(t, got, rescued, schema)
	}

	var want []fixture.Row
	if vals, ok := corpus.BeyondArrowGo[f.Name()]; ok {
		// arrow-go cannot read it: compare with the values the file's documentation gives.
		if len(schema.Fields) != 1 {
			t.Fatalf("table %s: want the single column of %s", schema.SQL(), f.Name())
		}
		for _, v := range vals {
			want = append(want, fixture.Row{schema.Fields[0].Name: v})
		}
		outcome = "loaded, equal to the documented values"
	} else {
		plain, err := corpus.ReadPlain(f.Path, f.Format, memory.DefaultAllocator)
		if err != nil {
			t.Fatalf("arrow-go's plain reader fails where the loader succeeds: %v", err)
		}
		defer plain.Release()
		if want, err = fixture.CanonicalRows(plain, schema); err != nil {
			t.Fatal(err)
		}
	}
	if rescued != nil {
		overflowsRescued(t, want, rescues, schema)
	}
	if sum.Rows != int64(len(want)) || sum.VerifiedRows == nil || *sum.VerifiedRows != sum.Rows {
		t.Errorf("summary: %d rows, verified %v; want %d", sum.Rows, sum.VerifiedRows, len(want))
	}
	t.Logf("%d rows, %d columns: %s", len(want), len(schema.Fields), outcome)
	if diffs := fixture.DiffRows(got, want, 10); len(diffs) > 0 {
		t.Errorf("table %s differs from the file:\n%s", schema.SQL(), join(diffs))
	}
	return outcome
}

// checkUnreadable runs a load that must fail with an error naming the file.
func checkUnreadable(t *testing.T, ctx context.Context, cfg load.Config, f corpus.File, why string) {
	t.Helper()
	_, err := load.Run(ctx, cfg)
	if err == nil {
		t.Fatalf("load.Run succeeded; the test expects it to fail (%s): update corpus.KnownUnreadable", why)
	}
	if !strings.Contains(err.Error(), f.Path) || !errors.Is(err, readers.ErrCorrupt) {
		t.Errorf("load.Run = %q; want an ErrCorrupt error naming %s (%s)", err, f.Path, why)
	}
}

// checkNoDeltaType checks a refusal names every top-level column whose type, found here without
// tableschema, no Delta column can hold.
func checkNoDeltaType(t *testing.T, err error, s *arrow.Schema) {
	t.Helper()
	msg := err.Error()
	if !strings.Contains(msg, "no Delta type") {
		t.Errorf("FromArrow error %q does not say \"no Delta type\"", msg)
	}
	named := 0
	for _, f := range s.Fields() {
		if why := noDeltaType(f.Type); why != "" {
			named++
			// the column itself, or a path inside it: column "m.value"
			if !strings.Contains(msg, `column "`+f.Name+`"`) && !strings.Contains(msg, `column "`+f.Name+`.`) {
				t.Errorf("FromArrow error %q does not name column %q (%s)", msg, f.Name, why)
			}
		}
	}
	if named == 0 {
		t.Errorf("FromArrow refused %s (%q) though every column has a Delta type", s, msg)
	}
}

// noDeltaType says why no Delta column can hold values of dt, or "" when one can.
func noDeltaType(dt arrow.DataType) string {
	switch dt := dt.(type) {
	case *arrow.Time32Type, *arrow.Time64Type, *arrow.DurationType,
		*arrow.MonthIntervalType, *arrow.DayTimeIntervalType, *arrow.MonthDayNanoIntervalType,
		*arrow.SparseUnionType, *arrow.DenseUnionType:
		return dt.String()
	case arrow.DecimalType:
		if dt.GetPrecision() > 38 {
			return dt.String()
		}
	case *arrow.MapType:
		if w := noDeltaType(dt.KeyType()); w != "" {
			return w
		}
		return noDeltaType(dt.ItemType())
	case arrow.ListLikeType:
		return noDeltaType(dt.Elem())
	case *arrow.StructType:
		if dt.NumFields() == 0 {
			return "an empty struct"
		}
		for _, f := range dt.Fields() {
			if w := noDeltaType(f.Type); w != "" {
				return w
			}
		}
	case *arrow.DictionaryType:
		return noDeltaType(dt.ValueType)
	case *arrow.RunEndEncodedType:
		return noDeltaType(dt.Encoded())
	case arrow.ExtensionType:
		return noDeltaType(dt.StorageType())
	}
	return ""
}

// rescueColumn receives the columns without a Delta type of a file loaded for its other columns.
const rescueColumn = "_rescued"

// holdable returns a table of the columns of s a Delta table can hold, plus rescueColumn last, and
// the names of the others; nil when no column can be held.
func holdable(s *arrow.Schema) (*tableschema.Schema, []string) {
	var out tableschema.Schema
	var rest []string
	for _, f := range s.Fields() {
		if t, err := tableschema.TypeFromArrow(f.Name, f.Type); err != nil {
			rest = append(rest, f.Name)
		} else {
			out.Fields = append(out.Fields, tableschema.Field{Name: f.Name, Type: t, Nullable: f.Nullable})
		}
	}
	if len(out.Fields) == 0 {
		return nil, rest
	}
	out.Fields = append(out.Fields, tableschema.Field{Name: rescueColumn, Type: tableschema.Primitive(tableschema.String), Nullable: true})
	return &out, rest
}

// takeRescued removes the rescue column from the rows and returns its JSON objects (nil where
// null), checking that their keys are rescued columns, columns of the table (for values that do not
// fit) or "_file_path".
func takeRescued(t *testing.T, rows []fixture.Row, rescued []string, s *tableschema.Schema) []map[string]json.RawMessage {
	t.Helper()
	out := make([]map[string]json.RawMessage, len(rows))
	bad := 0
	for i, r := range rows {
		v := r[rescueColumn]
		delete(r, rescueColumn)
		if v == nil {
			continue
		}
		if err := json.Unmarshal([]byte(v.(string)), &out[i]); err != nil {
			if bad++; bad <= 3 {
				t.Errorf("row %d: %s is not a JSON object: %v", i, rescueColumn, err)
			}
			continue
		}
		for k := range out[i] {
			if !slices.Contains(rescued, k) && s.FieldIndex(k) < 0 && k != "_file_path" {
				if bad++; bad <= 3 {
					t.Errorf("row %d: %s has key %q; want only %v, table columns or _file_path", i, rescueColumn, k, rescued)
				}
			}
		}
	}
	return out
}

// overflowsRescued expects null, and the value in the rescue column, where a top-level decimal value
// has more digits than its column's precision (arrow-testing's generated files hold such values).
func overflowsRescued(t *testing.T, want []fixture.Row, rescues []map[string]json.RawMessage, s *tableschema.Schema) {
	t.Helper()
	for _, f := range s.Fields {
		if f.Type.Kind != tableschema.Decimal {
			continue
		}
		for k, r := range want {
			text, ok := r[f.Name].(string)
			if !ok || digits(text) <= f.Type.Precision {
				continue
			}
			r[f.Name] = nil
			if _, ok := rescues[k][f.Name]; !ok {
				t.Errorf("row %d: %s has more digits than %s, but is not in %s", k, f.Name, f.Type.SQL(), rescueColumn)
			}
		}
	}
}

// digits counts the digits of decimal text that count against a DECIMAL's precision: the integer
// part's without leading zeros, and every fractional one ("-0.05" has 2).
func digits(text string) int {
	intPart, frac, _ := strings.Cut(strings.TrimPrefix(text, "-"), ".")
	intPart = strings.TrimLeft(intPart, "0")
	return len(intPart) + len(frac)
}
