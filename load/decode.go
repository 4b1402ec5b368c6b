package load

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/loaderproject/loader/manifest"
	"github.com/loaderproject/loader/readers"
	"github.com/loaderproject/loader/tableschema"
)

// unitLog is what the pipeline asks of and records in the manifest. *manifest.Manifest is the one
// Run uses; Decode, which sends nothing, runs with noLog.
type unitLog interface {
	UnitDone(f manifest.FileID, unit int) bool
	Acked(f manifest.FileID, unit int) []manifest.Range
	Ack(f manifest.FileID, unit int, r manifest.Range) error
	UnitRows(f manifest.FileID, unit int, rows int64) error
	Intent(f manifest.FileID, unit int, r manifest.Range) error
	Pending(f manifest.FileID, unit int) []manifest.Range
	Duplicate(f manifest.FileID, unit int, r manifest.Range) error
	Failed(f manifest.FileID, why string) error
	Sync() error
}

var _ unitLog = (*manifest.Manifest)(nil)

// noLog is the manifest of a run that remembers nothing: no unit is done, nothing is recorded.
type noLog struct{}

func (noLog) UnitDone(manifest.FileID, int) bool                   { return false }
func (noLog) Acked(manifest.FileID, int) []manifest.Range          { return nil }
func (noLog) Ack(manifest.FileID, int, manifest.Range) error       { return nil }
func (noLog) UnitRows(manifest.FileID, int, int64) error           { return nil }
func (noLog) Sync() error                                          { return nil }
func (noLog) Intent(manifest.FileID, int, manifest.Range) error    { return nil }
func (noLog) Pending(manifest.FileID, int) []manifest.Range        { return nil }
func (noLog) Duplicate(manifest.FileID, int, manifest.Range) error { return nil }
func (noLog) Failed(manifest.FileID, string) error                 { return nil }

// DecodeStats is what a Decode did.
type DecodeStats struct {
	Files   int           // files decoded
	Rows    int64         // rows read, matched and cast
	Elapsed time.Duration // from the first unit scheduled to the last batch cast
}

// Decode runs the input half of a load and nothing else: it finds cfg.Sources, then reads every
// unit, matches and casts its batches to the table's canonical schema on the same pool of
// cfg.Decoders workers as Run, through the same code, and hands each cast batch to each (nil
// discards them). It measures what decoding alone can deliver: the ceiling of a load's throughput
// (package bench).
//
// No target is contacted and no manifest is read or written: cfg.Target, Endpoint, Force and
// ManifestDir are ignored. The table's columns are cfg.TableSchema, else the first file's canonical
// schema (those a load that creates the table would give it). Decode stops at the first bad file,
// whatever cfg.OnError says, and returns its error; an error returned by each stops it too and is
// returned wrapped. cfg.Limit applies as in Run.
//
// each is called from the decoder goroutines, up to cfg.Decoders at once. The batch is released
// when each returns; each must Retain it to keep it.
func Decode(ctx context.Context, cfg Config, each func(arrow.RecordBatch) error) (DecodeStats, error) {
	if err := cfg.applyDefaults(false); err != nil {
		return DecodeStats{}, err
	}
	cfg.OnError = OnErrorFail
	found, err := findFiles(ctx, &cfg)
	if err != nil {
		return DecodeStats{}, err
	}
	defer found.Close()
	tbl, err := decodeTable(ctx, &cfg, found.first)
	if err != nil {
		return DecodeStats{}, err
	}
	if each == nil {
		each = func(arrow.RecordBatch) error { return nil }
	}
	p := &pipeline{
		cfg: &cfg, table: tbl, m: noLog{}, found: found, schema: tbl.schema.Arrow(),
		plans:   map[string]*planResult{},
		decoded: each,
	}
	p.remaining.Store(cfg.Limit)
	start := time.Now()
	cfg.Progress.started.Store(start.UnixNano())
	err = p.produce(ctx)
	stats := DecodeStats{Files: int(cfg.Progress.FilesDone.Load()), Rows: cfg.Progress.RowsRead.Load(), Elapsed: time.Since(start)}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return stats, fmt.Errorf("decode: %w", err)
	}
	return stats, nil
}

// decodeTable is the table a Decode casts to: cfg.TableSchema, else the first file's canonical
// schema.
func decodeTable(ctx context.Context, cfg *Config, first readers.File) (*table, error) {
	if cfg.TableSchema != nil {
		return &table{schema: cfg.TableSchema, from: fromGiven}, nil
	}
	src, err := schemaOf(ctx, cfg, first)
	if err != nil {
		return nil, err
	}
	s, err := tableschema.FromArrow(src)
	if err != nil {
		return nil, fmt.Errorf("%s: the table's columns cannot be taken from this file: %w", first.Path, err)
	}
	return &table{schema: s, from: fromFile}, nil
}
