package tableschema_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/extensions"

	"github.com/loaderproject/loader/tableschema"
)

func TestParseColumns(t *testing.T) {
	tests := []struct {
		in      string
		wantSQL string
	}{
		{"id BIGINT NOT NULL, name STRING", "id BIGINT NOT NULL, name STRING"},
		{"a tinyint, b smallint, c int, d bigint, e float, f double, g boolean",
			"a TINYINT, b SMALLINT, c INT, d BIGINT, e FLOAT, f DOUBLE, g BOOLEAN"},
		{"s string, b binary, d date, t timestamp, n timestamp_ntz",
			"s STRING, b BINARY, d DATE, t TIMESTAMP, n TIMESTAMP_NTZ"},
		{"p DECIMAL(10,2), q decimal, r NUMERIC(5)", "p DECIMAL(10,2), q DECIMAL(10,0), r DECIMAL(5,0)"},
		{"x LONG, y INTEGER, z SHORT, w BYTE, v VARCHAR(20), u REAL",
			"x BIGINT, y INT, z SMALLINT, w TINYINT, v STRING, u FLOAT"},
		{"tags ARRAY<STRING>, m MAP<STRING, ARRAY<INT>>", "tags ARRAY<STRING>, m MAP<STRING, ARRAY<INT>>"},
		{"pt STRUCT<x: DOUBLE NOT NULL, y DOUBLE, inner: STRUCT<z: INT>> NOT NULL",
			"pt STRUCT<x: DOUBLE NOT NULL, y: DOUBLE, inner: STRUCT<z: INT>> NOT NULL"},
		{"`quoted_name` INT", "quoted_name INT"},
		{"  id\tBIGINT\nNOT   NULL  ", "id BIGINT NOT NULL"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			s, err := tableschema.ParseColumns(tt.in)
			if err != nil {
				t.Fatalf("ParseColumns(%q) error: %v", tt.in, err)
			}
			if got := s.SQL(); got != tt.wantSQL {
				t.Errorf("ParseColumns(%q).SQL() = %q; want %q", tt.in, got, tt.wantSQL)
			}
			again, err := tableschema.ParseColumns(s.SQL())
			if err != nil || !again.Equal(s) {
				t.Errorf("ParseColumns(SQL()) = %v, %v; want a round trip", again, err)
			}
		})
	}
}

func TestParseColumnsErrors(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"", "expected a column name"},
		{"id", "expected a type"},
		{"id UUID", `unknown type "UUID"`},
		{"id INT NOT", "expected NULL after NOT"},
		{"id INT,", "expected a column name"},
		{"id INT name STRING", "expected ',' or end of list"},
		{"a ARRAY<INT", `expected ">"`},
		{"m MAP<STRING>", `expected ","`},
		{"d DECIMAL(39,2)", "precision"},
		{"d DECIMAL(5,6)", "scale"},
		{"a INT, A STRING", "duplicates"},
		{"`bad-name` INT", "ASCII letters"},
		{"s STRUCT<a INT, a STRING>", "duplicates"},
		{"s STRUCT<>", "at least one field"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := tableschema.ParseColumns(tt.in)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, tableschema.ErrInvalid) {
				t.Errorf("ParseColumns(%q) = %v; want an ErrInvalid containing %q", tt.in, err, tt.want)
			}
		})
	}
}

const allTypes = "i8 TINYINT, i16 SMALLINT, i32 INT NOT NULL, i64 BIGINT, f32 FLOAT, f64 DOUBLE, b BOOLEAN, " +
	"s STRING, bin BINARY, d DATE, ts TIMESTAMP, ntz TIMESTAMP_NTZ, dec DECIMAL(38,9), " +
	"arr ARRAY<STRING>, m MAP<STRING, DOUBLE>, st STRUCT<x: INT NOT NULL, tags: ARRAY<INT>>"

func TestDeltaJSONRoundTrip(t *testing.T) {
	s, err := tableschema.ParseColumns(allTypes)
	if err != nil {
		t.Fatal(err)
	}
	js := s.DeltaJSON()
	for _, want := range []string{`"type":"struct"`, `"type":"long"`, `"decimal(38,9)"`, `"timestamp_ntz"`,
		`"containsNull":true`, `"valueContainsNull":true`, `"nullable":false`, `"metadata":{}`} {
		if !strings.Contains(js, want) {
			t.Errorf("DeltaJSON() = %s; want it to contain %s", js, want)
		}
	}
	back, err := tableschema.ParseDeltaSchema(js)
	if err != nil {
		t.Fatalf("ParseDeltaSchema(%s): %v", js, err)
	}
	if !back.Equal(s) {
		t.Errorf("ParseDeltaSchema(DeltaJSON()) = %s; want %s", back.SQL(), s.SQL())
	}
	if !s.UsesTimestampNTZ() {
		t.Error("UsesTimestampNTZ() = false; want true")
	}
}

func TestParseDeltaSchemaErrors(t *testing.T) {
	for _, in := range []string{`"long"`, `{"type":"struct","fields":[{"name":"a","type":"interval"}]}`, `{`, `{"type":"udt"}`} {
		if _, err := tableschema.ParseDeltaSchema(in); err == nil {
			t.Errorf("ParseDeltaSchema(%s) = nil error; want one", in)
		}
	}
}

func TestArrowCanonical(t *testing.T) {
	s, err := tableschema.ParseColumns(allTypes)
	if err != nil {
		t.Fatal(err)
	}
	got := s.Arrow()
	want := arrow.NewSchema([]arrow.Field{
		{Name: "i8", Type: arrow.PrimitiveTypes.Int8, Nullable: true},
		{Name: "i16", Type: arrow.PrimitiveTypes.Int16, Nullable: true},
		{Name: "i32", Type: arrow.PrimitiveTypes.Int32},
		{Name: "i64", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "f32", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
		{Name: "f64", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.LargeString, Nullable: true},
		{Name: "bin", Type: arrow.BinaryTypes.LargeBinary, Nullable: true},
		{Name: "d", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
		{Name: "ntz", Type: &arrow.TimestampType{Unit: arrow.Microsecond}, Nullable: true},
		{Name: "dec", Type: arrow.BinaryTypes.LargeString, Nullable: true},
		{Name: "arr", Type: arrow.ListOfField(arrow.Field{Name: "item", Type: arrow.BinaryTypes.LargeString, Nullable: true}), Nullable: true},
		{Name: "m", Type: arrow.MapOf(arrow.BinaryTypes.LargeString, arrow.PrimitiveTypes.Float64), Nullable: true},
		{Name: "st", Type: arrow.StructOf(
			arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int32},
			arrow.Field{Name: "tags", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
		), Nullable: true},
	}, nil)
	if !got.Equal(want) {
		t.Errorf("Arrow() = %v; want %v", got, want)
	}
}

func TestFromArrow(t *testing.T) {
	dict := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}
	in := arrow.NewSchema([]arrow.Field{
		{Name: "u8", Type: arrow.PrimitiveTypes.Uint8},
		{Name: "u16", Type: arrow.PrimitiveTypes.Uint16, Nullable: true},
		{Name: "u32", Type: arrow.PrimitiveTypes.Uint32, Nullable: true},
		{Name: "u64", Type: arrow.PrimitiveTypes.Uint64, Nullable: true},
		{Name: "h", Type: arrow.FixedWidthTypes.Float16, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "sv", Type: arrow.BinaryTypes.StringView, Nullable: true},
		{Name: "fsb", Type: &arrow.FixedSizeBinaryType{ByteWidth: 4}, Nullable: true},
		{Name: "d64", Type: arrow.FixedWidthTypes.Date64, Nullable: true},
		{Name: "tsn", Type: &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "America/New_York"}, Nullable: true},
		{Name: "tsl", Type: &arrow.TimestampType{Unit: arrow.Millisecond}, Nullable: true},
		{Name: "dec", Type: &arrow.Decimal256Type{Precision: 20, Scale: 4}, Nullable: true},
		{Name: "dec32", Type: &arrow.Decimal32Type{Precision: 7, Scale: 2}, Nullable: true},
		{Name: "ll", Type: arrow.LargeListOf(arrow.PrimitiveTypes.Int64), Nullable: true},
		{Name: "fsl", Type: arrow.FixedSizeListOfNonNullable(3, arrow.PrimitiveTypes.Float32), Nullable: true},
		{Name: "dict", Type: dict, Nullable: true},
		{Name: "uuid", Type: extensions.NewUUIDType(), Nullable: true},
		{Name: "n", Type: arrow.Null, Nullable: true},
		{Name: "m", Type: arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int32), Nullable: true},
		{Name: "ree", Type: arrow.RunEndEncodedOf(arrow.PrimitiveTypes.Int32, arrow.BinaryTypes.StringView), Nullable: true},
		{Name: "lv", Type: arrow.ListViewOf(arrow.BinaryTypes.BinaryView), Nullable: true},
		{Name: "llv", Type: arrow.LargeListViewOf(arrow.PrimitiveTypes.Uint64), Nullable: true},
	}, nil)
	got, err := tableschema.FromArrow(in)
	if err != nil {
		t.Fatalf("FromArrow: %v", err)
	}
	const want = "u8 SMALLINT NOT NULL, u16 INT, u32 BIGINT, u64 DECIMAL(20,0), h FLOAT, s STRING, sv STRING, fsb BINARY, d64 DATE, " +
		"tsn TIMESTAMP, tsl TIMESTAMP_NTZ, dec DECIMAL(20,4), dec32 DECIMAL(7,2), ll ARRAY<BIGINT>, fsl ARRAY<FLOAT>, " +
		"dict STRING, uuid BINARY, n STRING, m MAP<STRING, INT>, ree STRING, lv ARRAY<BINARY>, llv ARRAY<DECIMAL(20,0)>"
	if got.SQL() != want {
		t.Errorf("FromArrow() = %s\nwant        %s", got.SQL(), want)
	}
	if got.Fields[14].Type.ElemNullable {
		t.Errorf("FromArrow(fixed_size_list non-nullable).ElemNullable = true; want false")
	}
}

func TestFromArrowRefusesEveryUnholdableColumn(t *testing.T) {
	in := arrow.NewSchema([]arrow.Field{
		{Name: "ok", Type: arrow.PrimitiveTypes.Int64},
		{Name: "t", Type: arrow.FixedWidthTypes.Time64us},
		{Name: "dur", Type: arrow.FixedWidthTypes.Duration_s},
		{Name: "iv", Type: arrow.FixedWidthTypes.MonthInterval},
		{Name: "wide", Type: &arrow.Decimal256Type{Precision: 60, Scale: 2}},
		{Name: "nested", Type: arrow.StructOf(arrow.Field{Name: "tt", Type: arrow.FixedWidthTypes.Time32s})},
	}, nil)
	_, err := tableschema.FromArrow(in)
	if !errors.Is(err, tableschema.ErrNoDeltaType) {
		t.Fatalf("FromArrow() = %v; want ErrNoDeltaType", err)
	}
	for _, col := range []string{`"t"`, `"dur"`, `"iv"`, `"wide"`, `"nested.tt"`} {
		if !strings.Contains(err.Error(), col) {
			t.Errorf("FromArrow() error %q does not name column %s", err, col)
		}
	}
	if strings.Contains(err.Error(), `"ok"`) {
		t.Errorf("FromArrow() error %q names the valid column", err)
	}
}

func TestParseTableName(t *testing.T) {
	if n, err := tableschema.ParseTableName("main.default.events_2"); err != nil || n.String() != "main.default.events_2" || len(n.Parts()) != 3 {
		t.Errorf("ParseTableName(main.default.events_2) = %v, %v", n, err)
	}
	for _, bad := range []string{"", "a.b", "a.b.c.d", "a..c", "a.b-c.d", "a.b. c", "ü.b.c"} {
		if _, err := tableschema.ParseTableName(bad); err == nil {
			t.Errorf("ParseTableName(%q) = nil error; want one", bad)
		}
	}
}

// TestStorageArrowRoundTrips: FromArrow reads StorageArrow back to the same schema, DECIMAL included
// (Arrow alone turns a DECIMAL into its text, which reads back as STRING).
func TestStorageArrowRoundTrips(t *testing.T) {
	s, err := tableschema.ParseColumns("id BIGINT NOT NULL, price DECIMAL(12,2) NOT NULL, tags ARRAY<DECIMAL(38,0)>, " +
		"m MAP<STRING, DECIMAL(5,5)>, st STRUCT<a: DECIMAL(3,1) NOT NULL, b: TIMESTAMP_NTZ>, at TIMESTAMP, d DATE, bin BINARY, f FLOAT")
	if err != nil {
		t.Fatal(err)
	}
	got, err := tableschema.FromArrow(s.StorageArrow())
	if err != nil || !got.Equal(s) {
		t.Errorf("FromArrow(StorageArrow()) = %v, %v; want %s", got, err, s.SQL())
	}
	if lossy, err := tableschema.FromArrow(s.Arrow()); err != nil || lossy.Equal(s) {
		t.Errorf("FromArrow(Arrow()) = %v, %v; want a schema with the decimals as STRING", lossy, err)
	}
}
