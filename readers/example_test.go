package readers_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/loaderproject/loader/readers"
	"github.com/loaderproject/loader/tableschema"
)

// Discover a directory, open each file with the target table, and read its units.
func Example() {
	dir, _ := os.MkdirTemp("", "readers-example")
	defer os.RemoveAll(dir)
	os.MkdirAll(filepath.Join(dir, "day=2024-03-01"), 0o755)
	os.WriteFile(filepath.Join(dir, "day=2024-03-01", "orders.csv"), []byte("id,price\n1,9.5\n2,\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "_SUCCESS"), nil, 0o644)

	table, _ := tableschema.ParseColumns("id BIGINT NOT NULL, price DECIMAL(6,2), day DATE")
	ctx := context.Background()
	files, err := readers.Discover(ctx, []string{dir})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, f := range files {
		src, err := readers.Open(ctx, f, readers.WithTable(table))
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(filepath.Base(f.Path), f.Format, f.Partitions)
		for _, u := range src.Units() {
			src.ReadUnit(ctx, u.Index, func(rec arrow.RecordBatch) error {
				for i := 0; i < int(rec.NumRows()); i++ {
					fmt.Println(rec.Column(0).ValueStr(i), rec.Column(1).ValueStr(i), rec.Column(2).ValueStr(i))
				}
				return nil
			})
		}
		src.Close()
	}
	// Output:
	// orders.csv csv [{day 2024-03-01}]
	// 1 9.50 2024-03-01
	// 2 (null) 2024-03-01
}
