package warehouse

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/loaderproject/loader/tableschema"
)

// TestDictionaryColumns checks that the Parquet column paths the dictionary rule names are the
// paths pqarrow gives the leaves (a wrong path would silently keep the default).
func TestDictionaryColumns(t *testing.T) {
	schema, err := tableschema.ParseColumns("id BIGINT, name STRING, d DECIMAL(20,2), s STRUCT<ts: TIMESTAMP, k: INT>, a ARRAY<DOUBLE>, m MAP<STRING, BIGINT>, p DECIMAL(9,2)")
	if err != nil {
		t.Fatal(err)
	}
	plan := newTablePlan(schema)
	props := parquet.NewWriterProperties(plan.parquetProps(memory.DefaultAllocator)...)
	sch, err := pqarrow.ToParquet(plan.storage, props, pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{
		"id": false, "name": true, "d": false, "s.ts": false, "s.k": true,
		"a.list.element": false, "m.key_value.key": true, "m.key_value.value": false, "p": true,
	}
	for i := 0; i < sch.NumColumns(); i++ {
		path := sch.Column(i).Path()
		dict, ok := want[path]
		if !ok {
			t.Errorf("Parquet column %q is not in the expectations", path)
			continue
		}
		if got := props.DictionaryEnabledFor(path); got != dict {
			t.Errorf("dictionary for %s = %t; want %t", path, got, dict)
		}
		delete(want, path)
	}
	for path := range want {
		t.Errorf("expected Parquet column %q does not exist", path)
	}
}
