package warehouse

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/loaderproject/loader/internal/delta"
	"github.com/loaderproject/loader/internal/fsutil"
	"github.com/loaderproject/loader/tableschema"
)

// Txn names an idempotent write: Delta's SetTransaction action.
type Txn struct {
	AppID   string
	Version int64
}

// CommitOptions describe a commit.
type CommitOptions struct {
	// Txn, when set, is recorded in the commit; if the table already holds this app id at Version or
	// later, Commit deletes the staged files and returns ErrTxnCommitted.
	Txn *Txn
	// MoreTxns are recorded in the commit too, without Txn's check (the embedded sink's unit ranges).
	// Their app ids must differ from each other and from Txn's.
	MoreTxns []Txn
	// Overwrite removes every file of the current snapshot in the same commit (Flight SQL replace).
	Overwrite bool
	// Schema, with Overwrite, replaces the table's schema (a new metaData action).
	Schema *tableschema.Schema
	// Operation and OperationParameters go into commitInfo; Operation defaults to "WRITE".
	Operation           string
	OperationParameters map[string]string
}

// CommitResult reports a successful commit.
type CommitResult struct {
	Version int64
	Rows    int64
	Files   int
	Bytes   int64
}

// ErrSchemaChanged means the rows of a Writer were written for a schema that is not the table's
// schema at the version the commit would land at (another writer replaced it, or CommitOptions.Schema
// differs from WithSchema). Nothing was committed; Abort the Writer.
var ErrSchemaChanged = errors.New("table schema changed")

// Commit finishes the data files and commits them as the next table version.
//
// The commit holds one "add" per data file with stats: numRecords; minValues and maxValues for
// numbers, strings (the first StatsStringPrefix characters), dates, timestamps and decimals,
// including struct fields (binary, boolean, array and map columns get none, nor do float columns
// holding NaN or infinities); and nullCount for every column and struct field (an array or map
// counts its null values, not its null elements). Then a "txn" action when opts.Txn is set, "remove"
// actions with opts.Overwrite, a new "metaData" (and "protocol", when the new schema needs a table
// feature) with opts.Schema, and a "commitInfo".
//
// Commit fsyncs the data files and the table directory, then creates the next version atomically;
// when another process took that version it re-reads the log and tries the next one (with
// Overwrite, removing the files current at the version it finally commits at). A commit with a Txn
// the table already holds deletes the staged files and returns ErrTxnCommitted.
//
// On ErrCommitConflict, ErrSchemaChanged, a cancelled ctx or an I/O error nothing is committed and
// the Writer keeps its files: call Commit again or Abort. After success or ErrTxnCommitted the Writer
// is finished (Abort does nothing).
func (w *Writer) Commit(ctx context.Context, opts CommitOptions) (CommitResult, error) {
	t := w.t
	if err := w.usable(ctx); err != nil {
		return CommitResult{}, err
	}
	fail := func(err error) (CommitResult, error) {
		return CommitResult{}, fmt.Errorf("warehouse: table %s: commit: %w", t.name, err)
	}
	if opts.Schema != nil {
		if !opts.Overwrite {
			return fail(errors.New("CommitOptions.Schema needs Overwrite"))
		}
		if err := opts.Schema.Validate(); err != nil {
			return fail(err)
		}
	}
	if opts.Txn != nil && opts.Txn.AppID == "" {
		return fail(errors.New("CommitOptions.Txn has an empty AppID"))
	}
	if w.cur != nil {
		if err := w.finishFile(); err != nil {
			w.err = err
			return fail(err)
		}
	}
	if len(w.staged) > 0 {
		if err := fsutil.SyncDir(t.dir); err != nil {
			return fail(err)
		}
	}
	var res CommitResult
	res.Files = len(w.staged)
	res.Rows = w.rows
	for _, s := range w.staged {
		res.Bytes += s.size
	}

	t.commitMu.Lock()
	defer t.commitMu.Unlock()
	attempts := t.wh.cfg.commitAttempts
	for attempt := 0; attempt < attempts; attempt++ {
		var (
			base      int64
			txnHeld   int64 = -1
			current   []delta.File
			schema    *tableschema.Schema
			proto     delta.Protocol
			meta      delta.MetaData
			hasTxnApp bool
		)
		err := t.update(ctx, func(st *delta.State, s *tableschema.Schema) error {
			base, schema, proto, meta = st.Version, s, *st.Protocol, *st.MetaData
			if opts.Txn != nil {
				txnHeld, hasTxnApp = st.Txns[opts.Txn.AppID]
			}
			if opts.Overwrite {
				current = st.Files()
			}
			return nil
		})
		if err != nil {
			return fail(err)
		}
		if opts.Txn != nil && hasTxnApp && txnHeld >= opts.Txn.Version {
			w.done = true
			w.discard()
			return CommitResult{}, fmt.Errorf("warehouse: table %s: commit: txn %q version %d (table holds %d): %w",
				t.name, opts.Txn.AppID, opts.Txn.Version, txnHeld, ErrTxnCommitted)
		}
		if err := delta.CheckWritable(&proto); err != nil {
			return fail(err)
		}
		if opts.Overwrite && meta.AppendOnly() {
			return fail(errors.New("the table is append-only (delta.appendOnly): overwrite refused"))
		}
		result := schema
		if opts.Schema != nil {
			result = opts.Schema
		}
		if w.plan != nil && !w.plan.schema.Equal(result) {
			return fail(fmt.Errorf("%w: the rows were written for (%s) but the table at version %d would have (%s)",
				ErrSchemaChanged, w.plan.schema.SQL(), base, result.SQL()))
		}
		version := base + 1
		actions := w.actions(version, opts, res, current, &proto, &meta)
		data, err := delta.EncodeCommit(actions)
		if err != nil {
			return fail(err)
		}
		if hook := t.wh.cfg.beforeLink; hook != nil {
			hook(version)
		}
		err = delta.WriteVersion(t.logDir, version, data)
		if errors.Is(err, delta.ErrVersionExists) {
			t.wh.cfg.logger.LogAttrs(ctx, slog.LevelDebug, "warehouse: commit conflict, retrying",
				slog.String("table", t.name.String()), slog.Int64("version", version), slog.Int("attempt", attempt+1))
			if err := ctx.Err(); err != nil {
				return fail(err)
			}
			continue
		}
		if err != nil && !errors.Is(err, delta.ErrNotDurable) {
			return fail(err)
		}
		// The version exists now: the files belong to the table.
		w.done = true
		w.staged = nil
		w.releaseNulls()
		t.applyCommitted(version, actions)
		res.Version = version
		if err != nil {
			return res, fmt.Errorf("warehouse: table %s: commit: %w", t.name, err)
		}
		return res, nil
	}
	return fail(fmt.Errorf("%w: %d attempts lost the race for the next version", ErrCommitConflict, attempts))
}

// applyCommitted applies this process's own commit to the cached state when it directly follows it,
// saving the re-read.
func (t *Table) applyCommitted(version int64, actions []delta.Action) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.state.Version == version-1 {
		if err := t.state.Apply(actions); err != nil {
			// Cannot happen for a state that already has protocol and metaData; re-read next time.
			t.state = delta.NewState()
		}
	}
}

// actions builds the commit's actions for version, over the state it was read at; res totals the
// staged files.
func (w *Writer) actions(version int64, opts CommitOptions, res CommitResult, current []delta.File, proto *delta.Protocol, meta *delta.MetaData) []delta.Action {
	now := time.Now().UnixMilli()
	actions := make([]delta.Action, 0, len(w.staged)+len(current)+4)
	mode := "Append"
	if opts.Overwrite {
		mode = "Overwrite"
	}
	params := map[string]any{"mode": mode, "partitionBy": "[]"}
	if opts.OperationParameters != nil {
		params = make(map[string]any, len(opts.OperationParameters))
		for k, v := range opts.OperationParameters {
			params[k] = v
		}
	}
	op := opts.Operation
	if op == "" {
		op = "WRITE"
	}
	ci := &delta.CommitInfo{
		Timestamp:           now,
		Operation:           op,
		OperationParameters: params,
		IsolationLevel:      "Serializable",
		IsBlindAppend:       !opts.Overwrite,
		EngineInfo:          EngineInfo,
		TxnID:               uuid.NewString(),
		OperationMetrics: map[string]string{
			"numFiles":       strconv.Itoa(res.Files),
			"numOutputRows":  strconv.FormatInt(res.Rows, 10),
			"numOutputBytes": strconv.FormatInt(res.Bytes, 10),
		},
	}
	if opts.Overwrite {
		read := version - 1
		ci.ReadVersion = &read
		var removedBytes int64
		for _, f := range current {
			removedBytes += f.Size
		}
		ci.OperationMetrics["numRemovedFiles"] = strconv.Itoa(len(current))
		ci.OperationMetrics["numRemovedBytes"] = strconv.FormatInt(removedBytes, 10)
	}
	actions = append(actions, delta.Action{CommitInfo: ci})
	if opts.Schema != nil {
		if opts.Schema.UsesTimestampNTZ() && !proto.HasFeature(delta.FeatureTimestampNTZ) {
			np := delta.ProtocolFor(true)
			if proto.MinWriterVersion == 7 { // keep the features the table has
				np.ReaderFeatures = union(proto.ReaderFeatures, np.ReaderFeatures)
				np.WriterFeatures = union(proto.WriterFeatures, np.WriterFeatures)
			}
			actions = append(actions, delta.Action{Protocol: &np})
		}
		md := *meta
		md.SchemaString = opts.Schema.DeltaJSON()
		actions = append(actions, delta.Action{MetaData: &md})
	}
	for _, t := range opts.MoreTxns {
		actions = append(actions, delta.Action{Txn: &delta.Txn{AppID: t.AppID, Version: t.Version, LastUpdated: &now}})
	}
	if opts.Txn != nil {
		actions = append(actions, delta.Action{Txn: &delta.Txn{AppID: opts.Txn.AppID, Version: opts.Txn.Version, LastUpdated: &now}})
	}
	for _, f := range current {
		size := f.Size
		actions = append(actions, delta.Action{Remove: &delta.Remove{
			Path: f.Path, DeletionTimestamp: &now, DataChange: true, ExtendedFileMetadata: true,
			PartitionValues: map[string]string{}, Size: &size,
		}})
	}
	for _, s := range w.staged {
		actions = append(actions, delta.Action{Add: &delta.Add{
			Path: s.name, PartitionValues: map[string]string{}, Size: s.size, ModificationTime: s.modTime,
			DataChange: true, Stats: s.stats,
		}})
	}
	return actions
}

func union(a, b []string) []string {
	out := append([]string(nil), a...)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}
