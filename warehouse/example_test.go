package warehouse_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderproject/loader/tableschema"
	"github.com/loaderproject/loader/warehouse"
)

// Example creates a table, commits two rows idempotently and reads them back.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "warehouse-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	wh, err := warehouse.Open(dir)
	if err != nil {
		log.Fatal(err)
	}
	schema, err := tableschema.ParseColumns("id BIGINT NOT NULL, price DECIMAL(10,2)")
	if err != nil {
		log.Fatal(err)
	}
	name, _ := tableschema.ParseTableName("main.shop.orders")
	tbl, err := wh.CreateTable(ctx, name, schema)
	if err != nil {
		log.Fatal(err)
	}

	// Batches use the canonical Arrow schema: decimals arrive as text.
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, schema.Arrow(),
		strings.NewReader(`[{"id": 1, "price": "19.9"}, {"id": 2, "price": null}]`))
	if err != nil {
		log.Fatal(err)
	}
	defer rec.Release()
	w := tbl.NewWriter()
	defer w.Abort() // deletes the staged files unless Commit succeeded
	if err := w.Write(ctx, rec); err != nil {
		log.Fatal(err)
	}
	res, err := w.Commit(ctx, warehouse.CommitOptions{Txn: &warehouse.Txn{AppID: "example", Version: 1}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("committed version", res.Version, "rows", res.Rows)

	rows, version, err := tbl.Count(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("count", rows, "at version", version)
	err = tbl.Scan(ctx, func(rec arrow.RecordBatch) error {
		fmt.Println(rec.Column(1))
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// committed version 1 rows 2
	// count 2 at version 1
	// ["19.90" (null)]
}
