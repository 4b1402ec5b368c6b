#!/usr/bin/env bash
# The out-of-the-box run: generate a deterministic dataset, create a table in a fresh embedded
# warehouse, load the dataset over real Flight DoPuts, and check the table holds exactly its rows.
set -euo pipefail

BIN=${BIN:-bin/loader}
DEMO_DIR=${DEMO_DIR:-testdata/demo}
DEMO_ROWS=${DEMO_ROWS:-1000000}
WAREHOUSE=${DEMO_WAREHOUSE:-.demo/warehouse}
TABLE=demo.default.events
STREAMS=${DEMO_STREAMS:-4}

stamp="$DEMO_DIR/.generated-$DEMO_ROWS"
if [ ! -f "$stamp" ]; then
  rm -rf "$DEMO_DIR"
  "$BIN" generate --out "$DEMO_DIR" --rows "$DEMO_ROWS"
  touch "$stamp"
fi

rm -rf "$WAREHOUSE"
"$BIN" table create "$TABLE" --warehouse "$WAREHOUSE" --like "$DEMO_DIR/part-00000.parquet"
"$BIN" load --table "$TABLE" --warehouse "$WAREHOUSE" --streams "$STREAMS" "$DEMO_DIR"

count=$("$BIN" table count "$TABLE" --warehouse "$WAREHOUSE" | tail -n 1)
if [ "$count" != "$DEMO_ROWS" ]; then
  echo "demo: FAILED: $TABLE holds $count rows, the dataset has $DEMO_ROWS" >&2
  exit 1
fi
echo "demo: OK: $TABLE holds $count rows, exactly the dataset's $DEMO_ROWS (warehouse: $WAREHOUSE)"
