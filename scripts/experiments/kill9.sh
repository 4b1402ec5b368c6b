#!/usr/bin/env bash
# The crash experiment of issue 10: ROWS rows in FILES Parquet files go into `loader serve`; the
# loader is killed with SIGKILL twice and the sink once, and each time the same command runs again.
# Then the table is read back and its duplicate and missing ids counted, next to the
# possibly_duplicated_rows the completed runs reported.
#
#   scripts/experiments/kill9.sh                       # this checkout's loader, exactly-once sink
#   SERVE_FLAGS=--unit-ids=false scripts/experiments/kill9.sh   # at-least-once, like Zerobus
#   LOADER_BIN=/path/to/old/loader LOADER_FLAGS= scripts/experiments/kill9.sh  # the "before" figure
#
# Kills strike at random moments (SEED makes them repeatable), so run it a few times.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROWS=${ROWS:-2000000}
FILES=${FILES:-40}
SEED=${SEED:-$RANDOM}
SERVE_FLAGS=${SERVE_FLAGS:-}
LOADER_FLAGS=${LOADER_FLAGS---retries 50 --retry-backoff 200ms}
if [[ -z "${LOADER_BIN:-}" ]]; then
	go build -o bin/loader ./cmd/loader
	LOADER_BIN=bin/loader
fi
RANDOM=$SEED
work=$(mktemp -d)
trap 'kill -9 $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
table=main.default.exp

"$LOADER_BIN" generate --out "$work/data" --rows "$ROWS" --files "$FILES" --row-group-rows 25000 >/dev/null
"$LOADER_BIN" table create "$table" --warehouse "$work/wh" --like "$work/data/part-00000.parquet" >/dev/null

serve() { # serve [ADDR]: starts the sink, sets $sink_pid and $addr
	local listen=${1:-127.0.0.1:0}
	# shellcheck disable=SC2086
	"$LOADER_BIN" serve --warehouse "$work/wh" --listen "$listen" --commit-interval 200ms $SERVE_FLAGS 2>"$work/serve.log" &
	sink_pid=$!
	for _ in $(seq 600); do
		addr=$(sed -n 's/^listening on //p' "$work/serve.log")
		[[ -n "$addr" ]] && return
		sleep 0.05
	done
	echo "sink did not start" >&2
	exit 1
}
serve
load() { # load OUT: runs the load in the background, sets $load_pid
	# shellcheck disable=SC2086
	"$LOADER_BIN" load --table "$table" --endpoint "grpc://$addr" --json --manifest-dir "$work/manifests" \
		$LOADER_FLAGS "$work/data" >"$1" 2>>"$work/load.log" &
	load_pid=$!
}
pause() { sleep "$(awk -v r=$RANDOM 'BEGIN { printf "%.2f", 1 + r / 32768 * 3 }')"; }

reported=0
add_reported() {
	local n
	n=$(sed -n 's/.*"possibly_duplicated_rows":\([0-9]*\).*/\1/p' "$1")
	reported=$((reported + ${n:-0}))
}
start=$(date +%s)
for i in 1 2; do
	load "$work/run$i.json"
	pause
	kill -9 "$load_pid" 2>/dev/null || true
	wait "$load_pid" 2>/dev/null || true
	add_reported "$work/run$i.json"
	echo "loader kill $i"
done
load "$work/run3.json"
pause
kill -9 "$sink_pid"
wait "$sink_pid" 2>/dev/null || true
echo "sink kill"
serve "$addr"
wait "$load_pid" || { echo "run 3 exited $?"; tail -5 "$work/load.log"; }
add_reported "$work/run3.json"
load "$work/run4.json"
wait "$load_pid" || { echo "run 4 exited $?"; tail -5 "$work/load.log"; }
add_reported "$work/run4.json"
elapsed=$(($(date +%s) - start))
kill "$sink_pid"
wait "$sink_pid" 2>/dev/null || true
echo "seed $SEED, $ROWS rows in $FILES files, ${elapsed}s, serve flags '$SERVE_FLAGS'"
echo "reported possibly_duplicated_rows=$reported"
go run ./scripts/experiments/idcount --warehouse "$work/wh" --table "$table" --expect "$ROWS"
