package warehouse

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/loaderproject/loader/internal/delta"
	"github.com/loaderproject/loader/tableschema"
)

// Table is one Delta table. It is safe for concurrent use; several Writers may commit at once.
type Table struct {
	wh     *Warehouse
	name   tableschema.TableName
	dir    string
	logDir string

	// commitMu serialises this process's commits to the table, so they do not race each other for a
	// version (other processes still can; Commit retries then).
	commitMu sync.Mutex

	mu       sync.Mutex // guards the fields below
	state    *delta.State
	schemaOf *delta.MetaData // the metaData schema was parsed from
	schema   *tableschema.Schema
	footRows map[string]int64 // row counts read from the footers of files without stats
}

// Name returns the table's name.
func (t *Table) Name() tableschema.TableName { return t.name }

// Dir returns the table's directory.
func (t *Table) Dir() string { return t.dir }

// Snapshot is the state of a table at one version.
type Snapshot struct {
	Version     int64
	ID          string // metaData.id
	Schema      *tableschema.Schema
	CreatedTime time.Time
	Files       []File
	NumRecords  int64            // sum of the files' stats numRecords
	Txns        map[string]int64 // app id -> latest committed txn version
}

// File is one data file of a snapshot.
type File struct {
	Path       string // relative to the table directory
	Size       int64
	NumRecords int64
}

// update brings the cached state up to the latest version and calls fn with it while holding t.mu.
// fn must not keep state after it returns.
func (t *Table) update(ctx context.Context, fn func(st *delta.State, schema *tableschema.Schema) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, err := t.state.Update(t.logDir); err != nil {
		return err
	}
	if t.state.Version < 0 {
		return fmt.Errorf("%w: %s has no version 0", ErrTableNotFound, t.logDir)
	}
	if err := t.parseSchemaLocked(); err != nil {
		return err
	}
	if err := delta.CheckReadable(t.state.Protocol, t.state.MetaData); err != nil {
		return fmt.Errorf("%s: %w", t.logDir, err)
	}
	return fn(t.state, t.schema)
}

func (t *Table) parseSchemaLocked() error {
	if t.schemaOf == t.state.MetaData {
		return nil
	}
	md := t.state.MetaData
	if len(md.PartitionColumns) > 0 {
		return fmt.Errorf("table %s is partitioned by %v: partitioned tables are not supported", t.name, md.PartitionColumns)
	}
	s, err := tableschema.ParseDeltaSchema(md.SchemaString)
	if err != nil {
		return fmt.Errorf("%s metaData schemaString: %w", t.logDir, err)
	}
	t.schema, t.schemaOf = s, md
	return nil
}

// Snapshot reads the latest version of the table's log (incrementally after the first call). The
// Snapshot is the caller's: later commits do not change it.
func (t *Table) Snapshot(ctx context.Context) (*Snapshot, error) {
	var snap *Snapshot
	err := t.update(ctx, func(st *delta.State, schema *tableschema.Schema) error {
		snap = &Snapshot{
			Version:    st.Version,
			ID:         st.MetaData.ID,
			Schema:     schema,
			NumRecords: st.NumRecords,
			Txns:       maps.Clone(st.Txns),
		}
		if st.MetaData.CreatedTime != nil {
			snap.CreatedTime = time.UnixMilli(*st.MetaData.CreatedTime)
		}
		files := st.Files()
		snap.Files = make([]File, len(files))
		for i, f := range files {
			p, n, err := t.fileRowsLocked(f)
			if err != nil {
				return err
			}
			if f.NumRecords < 0 {
				snap.NumRecords += n
			}
			snap.Files[i] = File{Path: p, Size: f.Size, NumRecords: n}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("warehouse: table %s: snapshot: %w", t.name, err)
	}
	return snap, nil
}

// Schema returns the schema of the latest snapshot.
func (t *Table) Schema(ctx context.Context) (*tableschema.Schema, error) {
	var out *tableschema.Schema
	err := t.update(ctx, func(_ *delta.State, schema *tableschema.Schema) error {
		out = schema
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("warehouse: table %s: schema: %w", t.name, err)
	}
	return out, nil
}

// Count returns the committed row count and the version it was read at. It reads only the log
// versions committed since the previous call.
func (t *Table) Count(ctx context.Context) (rows, version int64, err error) {
	err = t.update(ctx, func(st *delta.State, _ *tableschema.Schema) error {
		rows, version = st.NumRecords, st.Version
		if st.FilesWithoutStats == 0 {
			return nil
		}
		for _, f := range st.Files() {
			if f.NumRecords >= 0 {
				continue
			}
			_, n, err := t.fileRowsLocked(f)
			if err != nil {
				return err
			}
			rows += n
		}
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("warehouse: table %s: count: %w", t.name, err)
	}
	return rows, version, nil
}

// fileRowsLocked returns a live file's path relative to the table directory (see localPath) and its
// row count: the add's stats numRecords or, for add actions written without stats (by other Delta
// writers), the count in the file's Parquet footer.
func (t *Table) fileRowsLocked(f delta.File) (rel string, rows int64, err error) {
	if rel, err = localPath(f.Path); err != nil {
		return "", 0, err
	}
	if f.NumRecords >= 0 {
		return rel, f.NumRecords, nil
	}
	if n, ok := t.footRows[f.Path]; ok {
		return rel, n, nil
	}
	r, err := file.OpenParquetFile(filepath.Join(t.dir, filepath.FromSlash(rel)), false)
	if err != nil {
		return "", 0, fmt.Errorf("data file %s: %w", rel, err)
	}
	n := r.NumRows()
	r.Close()
	if t.footRows == nil {
		t.footRows = map[string]int64{}
	}
	t.footRows[f.Path] = n
	return rel, n, nil
}

// localPath turns an add action's path (a URI-encoded path relative to the table) into a slash-
// separated relative path. Absolute URIs are refused: this package only reads tables it can reach
// under their own directory.
func localPath(p string) (string, error) {
	u, err := url.PathUnescape(p)
	if err != nil {
		return "", fmt.Errorf("data file path %q: %w", p, err)
	}
	if strings.Contains(p, ":") || strings.HasPrefix(u, "/") || slices.Contains(strings.Split(u, "/"), "..") {
		return "", fmt.Errorf("data file path %q: only paths relative to the table directory are supported", p)
	}
	return u, nil
}
