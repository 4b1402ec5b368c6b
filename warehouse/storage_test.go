package warehouse_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/schema"

	"github.com/loaderproject/loader/warehouse"
)

// TestStorageMapping reads a data file's Parquet schema and checks the documented mapping: real
// decimals (INT32/INT64/FIXED_LEN_BYTE_ARRAY by precision), UTF8 strings, micros timestamps adjusted
// to UTC or not, INT32 dates, narrow integers, snappy compression.
func TestStorageMapping(t *testing.T) {
	ctx := context.Background()
	cols := "d9 DECIMAL(9,2), d18 DECIMAL(18,4), d38 DECIMAL(38,6), s STRING, bin BINARY, ts TIMESTAMP, ntz TIMESTAMP_NTZ, dt DATE, b TINYINT, sm SMALLINT, l BIGINT"
	mem, tbl := checkedTable(t, cols)
	rec := recordFromJSON(t, mem, mustColumns(t, cols).Arrow(), `[{"d9": "1.5", "d18": "2", "d38": "3", "s": "x", "ts": "2020-01-01T00:00:00Z", "ntz": "2020-01-01T00:00:00", "dt": "2020-01-01", "b": 1, "sm": 2, "l": 3}]`)
	defer rec.Release()
	commitRecords(t, tbl, warehouse.CommitOptions{}, rec)
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pf, err := file.OpenParquetFile(filepath.Join(tbl.Dir(), snap.Files[0].Path), false)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	sch := pf.MetaData().Schema
	want := map[string]struct {
		phys    parquet.Type
		logical string
	}{
		"d9":  {parquet.Types.Int32, "Decimal(precision=9, scale=2)"},
		"d18": {parquet.Types.Int64, "Decimal(precision=18, scale=4)"},
		"d38": {parquet.Types.FixedLenByteArray, "Decimal(precision=38, scale=6)"},
		"s":   {parquet.Types.ByteArray, "String"},
		"bin": {parquet.Types.ByteArray, "None"},
		"ts":  {parquet.Types.Int64, "Timestamp(isAdjustedToUTC=true, timeUnit=microseconds, is_from_converted_type=false, force_set_converted_type=false)"},
		"ntz": {parquet.Types.Int64, "Timestamp(isAdjustedToUTC=false, timeUnit=microseconds, is_from_converted_type=false, force_set_converted_type=false)"},
		"dt":  {parquet.Types.Int32, "Date"},
		"b":   {parquet.Types.Int32, "Int(bitWidth=8, isSigned=true)"},
		"sm":  {parquet.Types.Int32, "Int(bitWidth=16, isSigned=true)"},
		"l":   {parquet.Types.Int64, "Int(bitWidth=64, isSigned=true)"},
	}
	for i := 0; i < sch.NumColumns(); i++ {
		c := sch.Column(i)
		w, ok := want[c.Path()]
		if !ok {
			t.Errorf("unexpected column %s", c.Path())
			continue
		}
		logical := "None"
		if lt := c.LogicalType(); lt != nil && !lt.Equals(schema.NoLogicalType{}) {
			logical = lt.String()
		}
		if c.PhysicalType() != w.phys || logical != w.logical {
			t.Errorf("column %s = %s %s; want %s %s", c.Path(), c.PhysicalType(), logical, w.phys, w.logical)
		}
		cc, err := pf.MetaData().RowGroup(0).ColumnChunk(i)
		if err != nil {
			t.Fatal(err)
		}
		if cc.Compression().String() != "SNAPPY" {
			t.Errorf("column %s compression = %s; want SNAPPY", c.Path(), cc.Compression())
		}
	}
}
