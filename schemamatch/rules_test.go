package schemamatch_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/schemamatch"
	"github.com/loaderproject/loader/tableschema"
	"github.com/loaderproject/loader/zerobus"
)

// rule is one entry of the package's table of rules (doc.go): a source type, some values, a table
// column type and either the canonical values it must become or the reason it is refused.
type rule struct {
	name    string
	src     arrow.DataType
	srcJSON string
	table   string // column type as Databricks SQL, e.g. "BIGINT NOT NULL"
	want    string // JSON of the canonical output; "" for refused pairs
	refuse  string // substring of the problem's reason for refused pairs
	action  string // substring of the step's action, optional
}

var (
	tsUTC = func(u arrow.TimeUnit) arrow.DataType { return &arrow.TimestampType{Unit: u, TimeZone: "UTC"} }
	tsNY  = func(u arrow.TimeUnit) arrow.DataType {
		return &arrow.TimestampType{Unit: u, TimeZone: "America/New_York"}
	}
	tsNTZ = func(u arrow.TimeUnit) arrow.DataType { return &arrow.TimestampType{Unit: u} }
)

func allowedRules() []rule {
	return []rule{
		// integers
		{name: "int8 to TINYINT", src: arrow.PrimitiveTypes.Int8, srcJSON: `[1,-128,null,127]`, table: "TINYINT", want: `[1,-128,null,127]`, action: "copy"},
		{name: "int8 to SMALLINT", src: arrow.PrimitiveTypes.Int8, srcJSON: `[1,-128,null]`, table: "SMALLINT", want: `[1,-128,null]`, action: "cast int8 -> int16"},
		{name: "int8 to BIGINT", src: arrow.PrimitiveTypes.Int8, srcJSON: `[-1,null]`, table: "BIGINT", want: `[-1,null]`},
		{name: "int16 to INT", src: arrow.PrimitiveTypes.Int16, srcJSON: `[-32768,32767,null]`, table: "INT", want: `[-32768,32767,null]`},
		{name: "int32 to BIGINT", src: arrow.PrimitiveTypes.Int32, srcJSON: `[-2147483648,2147483647,null]`, table: "BIGINT", want: `[-2147483648,2147483647,null]`},
		{name: "uint8 to SMALLINT", src: arrow.PrimitiveTypes.Uint8, srcJSON: `[0,255,null]`, table: "SMALLINT", want: `[0,255,null]`},
		{name: "uint16 to INT", src: arrow.PrimitiveTypes.Uint16, srcJSON: `[0,65535,null]`, table: "INT", want: `[0,65535,null]`},
		{name: "uint32 to BIGINT", src: arrow.PrimitiveTypes.Uint32, srcJSON: `[0,4294967295,null]`, table: "BIGINT", want: `[0,4294967295,null]`},
		// floats
		{name: "float32 to DOUBLE", src: arrow.PrimitiveTypes.Float32, srcJSON: `[1.5,-0.25,null]`, table: "DOUBLE", want: `[1.5,-0.25,null]`},
		{name: "float16 to FLOAT", src: arrow.FixedWidthTypes.Float16, srcJSON: `[1.5,-2,null]`, table: "FLOAT", want: `[1.5,-2,null]`},
		{name: "float16 to DOUBLE", src: arrow.FixedWidthTypes.Float16, srcJSON: `[0.5,null]`, table: "DOUBLE", want: `[0.5,null]`},
		{name: "float64 to DOUBLE", src: arrow.PrimitiveTypes.Float64, srcJSON: `[0.1,null]`, table: "DOUBLE", want: `[0.1,null]`, action: "copy"},
		{name: "int16 to FLOAT", src: arrow.PrimitiveTypes.Int16, srcJSON: `[-32768,7,null]`, table: "FLOAT", want: `[-32768,7,null]`},
		{name: "uint16 to FLOAT", src: arrow.PrimitiveTypes.Uint16, srcJSON: `[65535,null]`, table: "FLOAT", want: `[65535,null]`},
		{name: "int32 to DOUBLE", src: arrow.PrimitiveTypes.Int32, srcJSON: `[-2147483648,null]`, table: "DOUBLE", want: `[-2147483648,null]`},
		{name: "uint32 to DOUBLE", src: arrow.PrimitiveTypes.Uint32, srcJSON: `[4294967295,null]`, table: "DOUBLE", want: `[4294967295,null]`},
		// booleans
		{name: "bool to BOOLEAN", src: arrow.FixedWidthTypes.Boolean, srcJSON: `[true,false,null]`, table: "BOOLEAN", want: `[true,false,null]`, action: "copy"},
		// text and bytes
		{name: "utf8 to STRING", src: arrow.BinaryTypes.String, srcJSON: `["a","",null,"héllo"]`, table: "STRING", want: `["a","",null,"héllo"]`, action: "cast utf8 -> large_utf8"},
		{name: "large_utf8 to STRING", src: arrow.BinaryTypes.LargeString, srcJSON: `["a",null]`, table: "STRING", want: `["a",null]`, action: "copy"},
		{name: "string_view to STRING", src: arrow.BinaryTypes.StringView, srcJSON: `["short","a string longer than twelve bytes",null]`, table: "STRING", want: `["short","a string longer than twelve bytes",null]`},
		{name: "binary to BINARY", src: arrow.BinaryTypes.Binary, srcJSON: `["AAE=",null,""]`, table: "BINARY", want: `["AAE=",null,""]`},
		{name: "large_binary to BINARY", src: arrow.BinaryTypes.LargeBinary, srcJSON: `["AAE=",null]`, table: "BINARY", want: `["AAE=",null]`, action: "copy"},
		{name: "binary_view to BINARY", src: arrow.BinaryTypes.BinaryView, srcJSON: `["AAE=",null]`, table: "BINARY", want: `["AAE=",null]`},
		{name: "fixed_size_binary to BINARY", src: &arrow.FixedSizeBinaryType{ByteWidth: 2}, srcJSON: `["AAE=",null,"//8="]`, table: "BINARY", want: `["AAE=",null,"//8="]`},
		// dates
		{name: "date32 to DATE", src: arrow.FixedWidthTypes.Date32, srcJSON: `["2024-02-29",null]`, table: "DATE", want: `["2024-02-29",null]`, action: "copy"},
		{name: "date64 to DATE", src: arrow.FixedWidthTypes.Date64, srcJSON: `[86400000,null,-1]`, table: "DATE", want: `[1,null,-1]`, action: "time of day dropped"},
		{name: "date32 to TIMESTAMP_NTZ", src: arrow.FixedWidthTypes.Date32, srcJSON: `[1,null]`, table: "TIMESTAMP_NTZ", want: `[86400000000,null]`},
		{name: "date64 to TIMESTAMP_NTZ", src: arrow.FixedWidthTypes.Date64, srcJSON: `[86400000,null]`, table: "TIMESTAMP_NTZ", want: `[86400000000,null]`},
		// timestamps
		{name: "timestamp[us, UTC] to TIMESTAMP", src: tsUTC(arrow.Microsecond), srcJSON: `[1,null]`, table: "TIMESTAMP", want: `[1,null]`, action: "copy"},
		{name: "timestamp[s] to TIMESTAMP", src: tsNTZ(arrow.Second), srcJSON: `[1,-1,null]`, table: "TIMESTAMP", want: `[1000000,-1000000,null]`},
		{name: "timestamp[ms, zone] to TIMESTAMP", src: tsNY(arrow.Millisecond), srcJSON: `[1,null]`, table: "TIMESTAMP", want: `[1000,null]`},
		{name: "timestamp[us, zone] to TIMESTAMP", src: tsNY(arrow.Microsecond), srcJSON: `[7,null]`, table: "TIMESTAMP", want: `[7,null]`, action: "no copy"},
		{name: "timestamp[ns, UTC] to TIMESTAMP", src: tsUTC(arrow.Nanosecond), srcJSON: `[1999,-1,1000,null]`, table: "TIMESTAMP", want: `[1,-1,1,null]`, action: "truncated"},
		{name: "timestamp[ns] to TIMESTAMP_NTZ", src: tsNTZ(arrow.Nanosecond), srcJSON: `[1500,null]`, table: "TIMESTAMP_NTZ", want: `[1,null]`},
		{name: "timestamp[us] to TIMESTAMP_NTZ", src: tsNTZ(arrow.Microsecond), srcJSON: `[5,null]`, table: "TIMESTAMP_NTZ", want: `[5,null]`, action: "copy"},
		{name: "timestamp[us, UTC] to TIMESTAMP_NTZ", src: tsUTC(arrow.Microsecond), srcJSON: `[5,null]`, table: "TIMESTAMP_NTZ", want: `[5,null]`},
		{name: "timestamp[s, zone] to TIMESTAMP_NTZ", src: tsNY(arrow.Second), srcJSON: `[2,null]`, table: "TIMESTAMP_NTZ", want: `[2000000,null]`},
		// decimals to decimal text
		{name: "decimal128(5,2) to DECIMAL(5,2)", src: &arrow.Decimal128Type{Precision: 5, Scale: 2}, srcJSON: `["123.45","-0.05","0",null]`, table: "DECIMAL(5,2)", want: `["123.45","-0.05","0.00",null]`},
		{name: "decimal128(5,2) to DECIMAL(10,4)", src: &arrow.Decimal128Type{Precision: 5, Scale: 2}, srcJSON: `["123.45","-1.00",null]`, table: "DECIMAL(10,4)", want: `["123.4500","-1.0000",null]`},
		{name: "decimal32(9,0) to DECIMAL(9,0)", src: &arrow.Decimal32Type{Precision: 9, Scale: 0}, srcJSON: `["999999999","-5",null]`, table: "DECIMAL(9,0)", want: `["999999999","-5",null]`},
		{name: "decimal64(18,3) to DECIMAL(20,3)", src: &arrow.Decimal64Type{Precision: 18, Scale: 3}, srcJSON: `["123456789012345.678",null]`, table: "DECIMAL(20,3)", want: `["123456789012345.678",null]`},
		{name: "decimal128(38,0) to DECIMAL(38,0)", src: &arrow.Decimal128Type{Precision: 38, Scale: 0}, srcJSON: `["99999999999999999999999999999999999999","-99999999999999999999999999999999999999"]`, table: "DECIMAL(38,0)", want: `["99999999999999999999999999999999999999","-99999999999999999999999999999999999999"]`},
		{name: "decimal256(20,10) to DECIMAL(38,18)", src: &arrow.Decimal256Type{Precision: 20, Scale: 10}, srcJSON: `["1234567890.0123456789",null]`, table: "DECIMAL(38,18)", want: `["1234567890.012345678900000000",null]`},
		// integers and text into decimals
		{name: "int32 to DECIMAL(10,0)", src: arrow.PrimitiveTypes.Int32, srcJSON: `[-2147483648,0,null]`, table: "DECIMAL(10,0)", want: `["-2147483648","0",null]`},
		{name: "int64 to DECIMAL(21,2)", src: arrow.PrimitiveTypes.Int64, srcJSON: `[-9223372036854775808,5,null]`, table: "DECIMAL(21,2)", want: `["-9223372036854775808.00","5.00",null]`},
		{name: "uint64 to DECIMAL(20,0)", src: arrow.PrimitiveTypes.Uint64, srcJSON: `[18446744073709551615,0,9223372036854775808,null]`, table: "DECIMAL(20,0)", want: `["18446744073709551615","0","9223372036854775808",null]`},
		{name: "uint64 to DECIMAL(38,18)", src: arrow.PrimitiveTypes.Uint64, srcJSON: `[18446744073709551615,1,null]`, table: "DECIMAL(38,18)", want: `["18446744073709551615.000000000000000000","1.000000000000000000",null]`},
		{name: "utf8 to DECIMAL(6,2)", src: arrow.BinaryTypes.String, srcJSON: `["1.5"," -0012.50 ","1e2","0.000",null]`, table: "DECIMAL(6,2)", want: `["1.50","-12.50","100.00","0.00",null]`},
		// canonical text is taken as it is, the rest normalized (a sign on zero dropped)
		{name: "large_utf8 to DECIMAL(6,2), canonical or not", src: arrow.BinaryTypes.LargeString, srcJSON: `["12.34","-0.00","0.05","-1234.56","12.3",null,"012.34"]`, table: "DECIMAL(6,2)", want: `["12.34","0.00","0.05","-1234.56","12.30",null,"12.34"]`},
		{name: "utf8_view to DECIMAL(4,0), canonical or not", src: arrow.BinaryTypes.StringView, srcJSON: `["9999","-0","+7","-12",null]`, table: "DECIMAL(4,0)", want: `["9999","0","7","-12",null]`},
		{name: "large_utf8 to DECIMAL(4,0)", src: arrow.BinaryTypes.LargeString, srcJSON: `["+9999","-0",null]`, table: "DECIMAL(4,0)", want: `["9999","0",null]`},
		{name: "string_view to DECIMAL(3,3)", src: arrow.BinaryTypes.StringView, srcJSON: `[".125",null]`, table: "DECIMAL(3,3)", want: `["0.125",null]`},
		// dictionaries, extensions, nulls
		{name: "dictionary<int8, utf8> to STRING", src: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}, srcJSON: ``, table: "STRING", want: `["b","a",null,"b"]`},
		{name: "uuid extension to BINARY", src: extensions.NewUUIDType(), srcJSON: `["00000000-0000-0000-0000-000000000001",null]`, table: "BINARY", want: `["AAAAAAAAAAAAAAAAAAAAAQ==",null]`},
		{name: "null to STRING", src: arrow.Null, srcJSON: `[null,null]`, table: "STRING", want: `[null,null]`},
		{name: "null to ARRAY<INT>", src: arrow.Null, srcJSON: `[null]`, table: "ARRAY<INT>", want: `[null]`},
		// nested
		{name: "list<element: int32> to ARRAY<BIGINT>", src: arrow.ListOfField(arrow.Field{Name: "element", Type: arrow.PrimitiveTypes.Int32, Nullable: true}), srcJSON: `[[1,null],null,[]]`, table: "ARRAY<BIGINT>", want: `[[1,null],null,[]]`},
		{name: "list<element: int64> to ARRAY<BIGINT>", src: arrow.ListOfField(arrow.Field{Name: "element", Type: arrow.PrimitiveTypes.Int64, Nullable: true}), srcJSON: `[[1,null],null]`, table: "ARRAY<BIGINT>", want: `[[1,null],null]`, action: "rename"},
		{name: "large_list<utf8> to ARRAY<STRING>", src: arrow.LargeListOf(arrow.BinaryTypes.String), srcJSON: `[["a"],null,["b",null]]`, table: "ARRAY<STRING>", want: `[["a"],null,["b",null]]`},
		{name: "fixed_size_list<int16,2> to ARRAY<INT>", src: arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Int16), srcJSON: `[[1,2],null,[3,null]]`, table: "ARRAY<INT>", want: `[[1,2],null,[3,null]]`},
		{name: "map<utf8,int32> to MAP<STRING,BIGINT>", src: arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int32), srcJSON: `[[{"key":"a","value":1},{"key":"b","value":null}],null,[]]`, table: "MAP<STRING, BIGINT>", want: `[[{"key":"a","value":1},{"key":"b","value":null}],null,[]]`},
		{name: "struct reordered and filled", src: arrow.StructOf(arrow.Field{Name: "b", Type: arrow.BinaryTypes.String, Nullable: true}, arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true}), srcJSON: `[{"b":"x","a":1},null,{"b":null,"a":null}]`, table: "STRUCT<a: BIGINT, b: STRING, c: DOUBLE>", want: `[{"a":1,"b":"x","c":null},null,{"a":null,"b":null,"c":null}]`},
		{name: "list of struct with decimal", src: arrow.ListOf(arrow.StructOf(arrow.Field{Name: "p", Type: &arrow.Decimal128Type{Precision: 4, Scale: 1}, Nullable: true})), srcJSON: `[[{"p":"1.5"},{"p":null}],null]`, table: "ARRAY<STRUCT<p: DECIMAL(6,2)>>", want: `[[{"p":"1.50"},{"p":null}],null]`},
	}
}

func refusedRules() []rule {
	return []rule{
		{name: "int16 to TINYINT", src: arrow.PrimitiveTypes.Int16, table: "TINYINT", refuse: "narrowing int16 to TINYINT"},
		{name: "int64 to INT", src: arrow.PrimitiveTypes.Int64, table: "INT", refuse: "narrowing int64 to INT"},
		{name: "uint8 to TINYINT", src: arrow.PrimitiveTypes.Uint8, table: "TINYINT", refuse: "narrowing uint8 to TINYINT"},
		{name: "uint32 to INT", src: arrow.PrimitiveTypes.Uint32, table: "INT", refuse: "narrowing uint32 to INT"},
		{name: "uint64 to BIGINT", src: arrow.PrimitiveTypes.Uint64, table: "BIGINT", refuse: "DECIMAL(20,0)"},
		{name: "float64 to FLOAT", src: arrow.PrimitiveTypes.Float64, table: "FLOAT", refuse: "narrowing double to FLOAT"},
		{name: "int32 to FLOAT", src: arrow.PrimitiveTypes.Int32, table: "FLOAT", refuse: "may lose precision"},
		{name: "int64 to DOUBLE", src: arrow.PrimitiveTypes.Int64, table: "DOUBLE", refuse: "may lose precision"},
		{name: "uint64 to DOUBLE", src: arrow.PrimitiveTypes.Uint64, table: "DOUBLE", refuse: "may lose precision"},
		{name: "float to INT", src: arrow.PrimitiveTypes.Float32, table: "INT", refuse: "cannot cast float32 to INT"},
		{name: "decimal to DOUBLE", src: &arrow.Decimal128Type{Precision: 10, Scale: 2}, table: "DOUBLE", refuse: "may lose precision"},
		{name: "decimal scale too big", src: &arrow.Decimal128Type{Precision: 12, Scale: 4}, table: "DECIMAL(12,2)", refuse: "scale 4"},
		{name: "decimal integer digits too many", src: &arrow.Decimal128Type{Precision: 10, Scale: 2}, table: "DECIMAL(9,2)", refuse: "8 integer digits"},
		{name: "decimal256 wider than 38", src: &arrow.Decimal256Type{Precision: 40, Scale: 0}, table: "DECIMAL(38,0)", refuse: "precision loss"},
		{name: "float to DECIMAL", src: arrow.PrimitiveTypes.Float64, table: "DECIMAL(10,2)", refuse: "binary floats"},
		{name: "int64 to DECIMAL(10,0)", src: arrow.PrimitiveTypes.Int64, table: "DECIMAL(10,0)", refuse: "19 integer digits"},
		{name: "uint64 to DECIMAL(19,0)", src: arrow.PrimitiveTypes.Uint64, table: "DECIMAL(19,0)", refuse: "precision loss: uint64 needs 20 integer digits, DECIMAL(19,0) has 19"},
		{name: "uint64 to DECIMAL(38,19)", src: arrow.PrimitiveTypes.Uint64, table: "DECIMAL(38,19)", refuse: "uint64 needs 20 integer digits"},
		{name: "utf8 to INT", src: arrow.BinaryTypes.String, table: "INT", refuse: "cannot cast utf8 to INT"},
		{name: "utf8 to BINARY", src: arrow.BinaryTypes.String, table: "BINARY", refuse: "cannot cast"},
		{name: "binary to STRING", src: arrow.BinaryTypes.Binary, table: "STRING", refuse: "cannot cast binary to STRING"},
		{name: "int32 to STRING", src: arrow.PrimitiveTypes.Int32, table: "STRING", refuse: "no implicit cast from int32 to STRING"},
		{name: "bool to INT", src: arrow.FixedWidthTypes.Boolean, table: "INT", refuse: "cannot cast bool to INT"},
		{name: "int8 to BOOLEAN", src: arrow.PrimitiveTypes.Int8, table: "BOOLEAN", refuse: "no implicit cast"},
		{name: "timestamp to DATE", src: tsUTC(arrow.Microsecond), table: "DATE", refuse: "cannot cast"},
		{name: "date32 to TIMESTAMP", src: arrow.FixedWidthTypes.Date32, table: "TIMESTAMP", refuse: "only TIMESTAMP_NTZ takes dates"},
		{name: "time64 has no Delta type", src: arrow.FixedWidthTypes.Time64us, table: "BIGINT", refuse: "no Delta type for time64[us]"},
		{name: "time32 has no Delta type", src: arrow.FixedWidthTypes.Time32ms, table: "STRING", refuse: "no Delta type for time32[ms]"},
		{name: "duration has no Delta type", src: arrow.FixedWidthTypes.Duration_ns, table: "BIGINT", refuse: "no Delta type for duration[ns]"},
		{name: "interval has no Delta type", src: arrow.FixedWidthTypes.MonthDayNanoInterval, table: "STRING", refuse: "no Delta type for month_day_nano_interval"},
		{name: "union has no Delta type", src: arrow.SparseUnionOf([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int32}}, []arrow.UnionTypeCode{0}), table: "INT", refuse: "no Delta type for sparse_union"},
		{name: "list view", src: arrow.ListViewOf(arrow.PrimitiveTypes.Int32), table: "ARRAY<INT>", refuse: "list views"},
		{name: "run-end encoded", src: arrow.RunEndEncodedOf(arrow.PrimitiveTypes.Int32, arrow.BinaryTypes.String), table: "STRING", refuse: "run-end encoded"},
		{name: "null type into NOT NULL", src: arrow.Null, table: "STRING NOT NULL", refuse: "null type"},
		{name: "list into STRING", src: arrow.ListOf(arrow.BinaryTypes.String), table: "STRING", refuse: "cannot cast list"},
		{name: "struct into MAP", src: arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32}), table: "MAP<STRING, INT>", refuse: "cannot cast struct"},
		{name: "map into ARRAY", src: arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int32), table: "ARRAY<INT>", refuse: "cannot cast map"},
		{name: "list element narrowing", src: arrow.ListOf(arrow.PrimitiveTypes.Int64), table: "ARRAY<INT>", refuse: "narrowing int64 to INT"},
		{name: "struct field not in table", src: arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true}, arrow.Field{Name: "z", Type: arrow.PrimitiveTypes.Int32, Nullable: true}), table: "STRUCT<a: INT>", refuse: "struct field not in table"},
		{name: "struct missing NOT NULL field", src: arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true}), table: "STRUCT<a: INT, b: INT NOT NULL>", refuse: "missing NOT NULL struct field"},
	}
}

// oneColumnTable parses "TYPE [NOT NULL]" into a one-column table named c.
func oneColumnTable(t *testing.T, typ string) *tableschema.Schema {
	t.Helper()
	ts, err := tableschema.ParseColumns("c " + typ)
	if err != nil {
		t.Fatalf("ParseColumns(%q): %v", typ, err)
	}
	return ts
}

func fromJSON(t *testing.T, mem memory.Allocator, dt arrow.DataType, js string) arrow.Array {
	t.Helper()
	if dd, ok := dt.(*arrow.DictionaryType); ok && js == "" {
		// ["b","a",null,"b"] as a dictionary with values ["a","b"]
		ib := array.NewDictionaryBuilder(mem, dd)
		defer ib.Release()
		sb := ib.(*array.BinaryDictionaryBuilder)
		sb.AppendString("b")
		sb.AppendString("a")
		sb.AppendNull()
		sb.AppendString("b")
		return ib.NewArray()
	}
	arr, _, err := array.FromJSON(mem, dt, strings.NewReader(js))
	if err != nil {
		t.Fatalf("FromJSON(%s, %s): %v", dt, js, err)
	}
	return arr
}

// ruleSchemas returns rule r's source schema, its source type as nullable column c, and its
// one-column table.
func ruleSchemas(t *testing.T, r rule) (*arrow.Schema, *tableschema.Schema) {
	t.Helper()
	return arrow.NewSchema([]arrow.Field{{Name: "c", Type: r.src, Nullable: true}}, nil), oneColumnTable(t, r.table)
}

// planRule plans rule r (see ruleSchemas) on a checked allocator, which it returns and which must
// hold nothing once the test and its deferred releases are done.
func planRule(t *testing.T, r rule) (memory.Allocator, *arrow.Schema, *tableschema.Schema, *schemamatch.Plan) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	src, table := ruleSchemas(t, r)
	plan, err := schemamatch.NewPlan(src, table, schemamatch.WithAllocator(mem))
	if err != nil {
		t.Fatalf("NewPlan(%s -> %s) = %v; want a plan", r.src, r.table, err)
	}
	return mem, src, table, plan
}

func TestAllowedRules(t *testing.T) {
	for _, r := range allowedRules() {
		t.Run(r.name, func(t *testing.T) {
			mem, src, table, plan := planRule(t, r)
			if verr := zerobus.ValidateSchema(table, plan.Schema()); verr != nil {
				t.Fatalf("Plan.Schema() fails zerobus.ValidateSchema: %v", verr)
			}
			if r.action != "" {
				if got := plan.Steps()[0].Action; !strings.Contains(got, r.action) {
					t.Errorf("Steps()[0].Action = %q; want it to contain %q", got, r.action)
				}
			}
			in := fromJSON(t, mem, r.src, r.srcJSON)
			defer in.Release()
			rec := array.NewRecordBatch(src, []arrow.Array{in}, int64(in.Len()))
			defer rec.Release()
			out, err := plan.Apply(rec)
			if err != nil {
				t.Fatalf("Apply = %v", err)
			}
			defer out.Release()
			if !out.Schema().Equal(plan.Schema()) {
				t.Fatalf("Apply schema = %s; want %s", out.Schema(), plan.Schema())
			}
			if d := zerobus.TypeDiff("c", out.Column(0).DataType(), table.Fields[0].Type.Arrow()); d != "" {
				t.Fatalf("output array type differs from canonical: %s", d)
			}
			want := fromJSON(t, mem, table.Fields[0].Type.Arrow(), r.want)
			defer want.Release()
			if !array.Equal(out.Column(0), want) {
				t.Errorf("Apply(%s) = %s; want %s", r.srcJSON, out.Column(0), want)
			}
			// The same plan applied to a slice of the batch gives the slice of the answer.
			if in.Len() > 1 {
				sl := rec.NewSlice(1, int64(in.Len()))
				defer sl.Release()
				sout, err := plan.Apply(sl)
				if err != nil {
					t.Fatalf("Apply(slice) = %v", err)
				}
				defer sout.Release()
				wsl := array.NewSlice(want, 1, int64(want.Len()))
				defer wsl.Release()
				if !array.Equal(sout.Column(0), wsl) {
					t.Errorf("Apply(slice) = %s; want %s", sout.Column(0), wsl)
				}
			}
		})
	}
}

func TestRefusedRules(t *testing.T) {
	for _, r := range refusedRules() {
		t.Run(r.name, func(t *testing.T) {
			src, table := ruleSchemas(t, r)
			_, err := schemamatch.NewPlan(src, table, schemamatch.WithSource("f.parquet"))
			var me *schemamatch.MismatchError
			if !errors.As(err, &me) {
				t.Fatalf("NewPlan(%s -> %s) = %v; want a *MismatchError", r.src, r.table, err)
			}
			if !errors.Is(err, schemamatch.ErrMismatch) {
				t.Errorf("error does not wrap ErrMismatch")
			}
			found := false
			for _, p := range me.Problems {
				if strings.Contains(p.Reason, r.refuse) {
					found = true
					if !strings.HasPrefix(p.Column, "c") {
						t.Errorf("problem column = %q; want c or c.*", p.Column)
					}
				}
			}
			if !found {
				t.Errorf("problems = %+v; want a reason containing %q", me.Problems, r.refuse)
			}
			if !strings.Contains(err.Error(), "f.parquet") {
				t.Errorf("error %q does not name the source", err)
			}
		})
	}
}

// TestEmptyBatches applies every allowed rule to a zero-row batch.
func TestEmptyBatches(t *testing.T) {
	for _, r := range allowedRules() {
		t.Run(r.name, func(t *testing.T) {
			mem, src, _, plan := planRule(t, r)
			in := array.MakeArrayOfNull(mem, r.src, 0)
			defer in.Release()
			rec := array.NewRecordBatch(src, []arrow.Array{in}, 0)
			defer rec.Release()
			out, err := plan.Apply(rec)
			if err != nil {
				t.Fatalf("Apply(empty) = %v", err)
			}
			defer out.Release()
			if out.NumRows() != 0 || !out.Schema().Equal(plan.Schema()) {
				t.Errorf("Apply(empty) = %d rows of %s", out.NumRows(), out.Schema())
			}
		})
	}
}
