package schemamatch_test

import (
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/schemamatch"
	"github.com/loaderproject/loader/tableschema"
)

// A Parquet-style source (utf8 strings, nanosecond timestamps, a decimal, a list named "element")
// planned against a table, then one batch cast to the table's canonical types.
func ExampleNewPlan() {
	table, _ := tableschema.ParseColumns("id BIGINT NOT NULL, name STRING, at TIMESTAMP, price DECIMAL(10,2), tags ARRAY<STRING>, note STRING")
	source := arrow.NewSchema([]arrow.Field{
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "id", Type: arrow.PrimitiveTypes.Int32},
		{Name: "at", Type: &arrow.TimestampType{Unit: arrow.Nanosecond}, Nullable: true},
		{Name: "price", Type: &arrow.Decimal128Type{Precision: 9, Scale: 1}, Nullable: true},
		{Name: "tags", Type: arrow.ListOfField(arrow.Field{Name: "element", Type: arrow.BinaryTypes.String, Nullable: true}), Nullable: true},
	}, nil)
	plan, err := schemamatch.NewPlan(source, table, schemamatch.WithSource("part-0.parquet"))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range plan.Steps() {
		fmt.Printf("%s: %s\n", s.Column, s.Action)
	}
	rec, _, _ := array.RecordFromJSON(memory.DefaultAllocator, source, strings.NewReader(
		`[{"name":"a","id":1,"at":1700000000123456789,"price":"12.5","tags":["x"]}]`))
	defer rec.Release()
	out, _ := plan.Apply(rec)
	defer out.Release()
	for i, col := range out.Columns() {
		fmt.Printf("%s = %s\n", out.ColumnName(i), col.ValueStr(0))
	}
	// Output:
	// id: cast int32 -> int64
	// name: cast utf8 -> large_utf8
	// at: cast timestamp[ns] -> timestamp[us, tz=UTC] (sub-microsecond digits truncated)
	// price: cast decimal(9, 1) -> large_utf8
	// tags: cast list<element: utf8, nullable> -> list<item: large_utf8, nullable>
	// note: fill nulls
	// id = 1
	// name = a
	// at = 2023-11-14T22:13:20.123456Z
	// price = 12.50
	// tags = ["x"]
	// note = (null)
}

// Everything wrong with a schema comes back in one error.
func ExampleMismatchError() {
	table, _ := tableschema.ParseColumns("id INT NOT NULL, total DOUBLE")
	source := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "total", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "t", Type: arrow.FixedWidthTypes.Time64us, Nullable: true},
	}, nil)
	_, err := schemamatch.NewPlan(source, table, schemamatch.WithSource("orders.parquet"))
	fmt.Println(err)
	// Output:
	// orders.parquet: schema does not match the table (3 problems):
	//   column "id": expected INT NOT NULL, actual int64: narrowing int64 to INT
	//   column "total": expected DOUBLE, actual int64: int64 to DOUBLE may lose precision (not every int64 is exact in a 64-bit float)
	//   column "t": actual time64[us]: not in table
}
