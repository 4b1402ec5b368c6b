// Command idcount reads a Delta table of a warehouse back and counts its rows, its duplicate ids and
// the ids of [0, --expect) it lacks: the check of the crash experiments (kill9.sh).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/loaderproject/loader/tableschema"
	"github.com/loaderproject/loader/warehouse"
)

func main() {
	dir := flag.String("warehouse", "", "the warehouse directory")
	table := flag.String("table", "", "catalog.schema.table")
	expect := flag.Int64("expect", 0, "ids 0..expect-1 should each be there once")
	flag.Parse()
	if err := run(*dir, *table, *expect); err != nil {
		fmt.Fprintln(os.Stderr, "idcount:", err)
		os.Exit(1)
	}
}

func run(dir, table string, expect int64) error {
	name, err := tableschema.ParseTableName(table)
	if err != nil {
		return err
	}
	wh, err := warehouse.Open(dir)
	if err != nil {
		return err
	}
	t, err := wh.Table(context.Background(), name)
	if err != nil {
		return err
	}
	seen := make([]uint8, expect)
	var rows, dups, outside int64
	err = t.Scan(context.Background(), func(rec arrow.RecordBatch) error {
		idx := rec.Schema().FieldIndices("id")
		if len(idx) != 1 {
			return fmt.Errorf("table %s has no id column", table)
		}
		col, ok := rec.Column(idx[0]).(*array.Int64)
		if !ok {
			return fmt.Errorf("column id is %s, want BIGINT", rec.Column(idx[0]).DataType())
		}
		for i := range col.Len() {
			rows++
			id := col.Value(i)
			if id < 0 || id >= expect {
				outside++
				continue
			}
			if seen[id] > 0 {
				dups++
			}
			if seen[id] < 255 {
				seen[id]++
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	var missing int64
	for _, c := range seen {
		if c == 0 {
			missing++
		}
	}
	fmt.Printf("rows=%d duplicates=%d missing=%d outside=%d\n", rows, dups, missing, outside)
	return nil
}
