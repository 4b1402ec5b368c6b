package load

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/loaderproject/loader/flightclient"
	"github.com/loaderproject/loader/readers"
	"github.com/loaderproject/loader/tableschema"
)

// Target is where a load writes: a table behind a Flight endpoint (NewRemote) or the embedded sink
// (package embedded). Run and Plan use nothing else of it. Its methods may be called from several
// goroutines.
//
// A target that keeps its own manifests (the embedded sink keeps them in its warehouse) also has a
// method ManifestDir() string, used when Config.ManifestDir is empty.
type Target interface {
	// String identifies the target in summaries and in the manifest's name, e.g.
	// "zerobus:https://host" or "embedded:/abs/warehouse".
	String() string
	// Describe returns the table's schema and identity. The error matches
	// flightclient.ErrUnsupported when the target cannot describe tables, and
	// flightclient.ErrTableNotFound when the table does not exist.
	Describe(ctx context.Context, table tableschema.TableName) (flightclient.TableInfo, error)
	// Create creates the table with schema if it does not exist. The error matches
	// flightclient.ErrUnsupported when the target cannot create tables.
	Create(ctx context.Context, table tableschema.TableName, schema *tableschema.Schema) error
	// Count returns the table's committed row count after the target committed what it had
	// acknowledged. The error matches flightclient.ErrUnsupported (an
	// *flightclient.UnsupportedError saying why) when the target cannot count.
	Count(ctx context.Context, table tableschema.TableName) (int64, error)
	// Streams returns the client the load's DoPut streams use, made with opts (the load's
	// connections, frame limit, logger) added to the target's own (token, TLS, user agent). The
	// target owns the client and closes it in Close.
	Streams(ctx context.Context, opts ...flightclient.Option) (*flightclient.Client, error)
	// Close releases what the target holds. Run calls it when it returns.
	Close(ctx context.Context) error
}

// remote is a Target behind a Flight endpoint, in one dialect.
type remote struct {
	endpoint string
	dialect  flightclient.Dialect
	opts     []flightclient.Option
	ctl      *flightclient.Client // describe, count, create

	mu      sync.Mutex
	clients []*flightclient.Client // made by Streams, closed by Close
}

// NewRemote returns the target at endpoint (grpc://host:port, grpc+tls://host:port or
// https://host[:port]) in the given dialect; opts (a token source, TLS, a user agent) apply to every
// call. It does no I/O.
func NewRemote(endpoint string, dialect flightclient.Dialect, opts ...flightclient.Option) (Target, error) {
	ctl, err := flightclient.New(endpoint, dialect, opts...)
	if err != nil {
		return nil, err
	}
	return &remote{endpoint: endpoint, dialect: dialect, opts: opts, ctl: ctl}, nil
}

func (r *remote) String() string { return string(r.dialect) + ":" + r.endpoint }

func (r *remote) Describe(ctx context.Context, table tableschema.TableName) (flightclient.TableInfo, error) {
	return r.ctl.Describe(ctx, table)
}

func (r *remote) Create(ctx context.Context, table tableschema.TableName, schema *tableschema.Schema) error {
	// The stored types, not the wire's: a DECIMAL must not be created as the text it travels as.
	return r.ctl.Create(ctx, table, schema.StorageArrow())
}

func (r *remote) Count(ctx context.Context, table tableschema.TableName) (int64, error) {
	return r.ctl.Count(ctx, table)
}

func (r *remote) Streams(_ context.Context, opts ...flightclient.Option) (*flightclient.Client, error) {
	c, err := flightclient.New(r.endpoint, r.dialect, append(append([]flightclient.Option{}, r.opts...), opts...)...)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.clients = append(r.clients, c)
	r.mu.Unlock()
	return c, nil
}

func (r *remote) Close(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	errs := []error{r.ctl.Close()}
	for _, c := range r.clients {
		errs = append(errs, c.Close())
	}
	r.clients = nil
	return errors.Join(errs...)
}

// openTarget returns cfg.Target, or the remote target cfg.Endpoint names.
func openTarget(cfg *Config) (Target, error) {
	if cfg.Target != nil {
		return cfg.Target, nil
	}
	var opts []flightclient.Option
	if cfg.Token != "" {
		opts = append(opts, flightclient.WithToken(cfg.Token))
	}
	if cfg.UserAgent != "" {
		opts = append(opts, flightclient.WithUserAgent(cfg.UserAgent))
	}
	tgt, err := NewRemote(cfg.Endpoint, cfg.Protocol, opts...)
	if err != nil {
		return nil, errors.Join(ErrConfig, err)
	}
	return tgt, nil
}

// Where the table's columns came from.
const (
	fromTarget = "target"     // the target described the table
	fromGiven  = "given"      // Config.TableSchema
	fromFile   = "first file" // the first file's canonical schema
)

// table is what a load learned of its table before sending anything.
type table struct {
	schema *tableschema.Schema
	id     string // the target's identity of the table, "" if it has none
	from   string // fromTarget, fromGiven or fromFile
	// reported is what the target described, when it could (the schema used may be the given one).
	reported *tableschema.Schema
	// createdFrom is the file the table was created from in this run, if it was.
	createdFrom string
}

// resolveTable learns the table's schema: the target's description, overridden by cfg.TableSchema;
// where the target cannot describe tables, cfg.TableSchema or the first file's canonical schema. A
// missing table is created when cfg.CreateTable is set (and create says so; a dry run does not).
func resolveTable(ctx context.Context, cfg *Config, tgt Target, first readers.File, create bool) (*table, error) {
	firstFile := first.Path
	fromFirst := func() (*tableschema.Schema, error) {
		src, err := schemaOf(ctx, cfg, first)
		if err != nil {
			return nil, err
		}
		s, err := tableschema.FromArrow(src)
		if err != nil {
			return nil, fmt.Errorf("%s: the table's columns cannot be taken from this file: %w", firstFile, err)
		}
		return s, nil
	}
	assumed := func() (*table, error) {
		if cfg.TableSchema != nil {
			return &table{schema: cfg.TableSchema, from: fromGiven}, nil
		}
		s, err := fromFirst()
		if err != nil {
			return nil, err
		}
		return &table{schema: s, from: fromFile}, nil
	}

	info, err := tgt.Describe(ctx, cfg.Table)
	switch {
	case err == nil:
		t := &table{schema: info.Schema, id: info.ID, from: fromTarget, reported: info.Schema}
		if cfg.TableSchema != nil {
			if !cfg.TableSchema.Equal(info.Schema) {
				cfg.Logger.Warn("the table schema given differs from the target's description; using the one given",
					"table", cfg.Table.String(), "given", cfg.TableSchema.SQL(), "described", info.Schema.SQL())
			}
			t.schema, t.from = cfg.TableSchema, fromGiven
		}
		return t, nil
	case errors.Is(err, flightclient.ErrTableNotFound) && cfg.CreateTable:
		t, err := assumed()
		if err != nil || !create {
			return t, err
		}
		if err := tgt.Create(ctx, cfg.Table, t.schema); err != nil {
			return nil, createError(cfg, err)
		}
		if t.from == fromFile {
			t.createdFrom = firstFile
		}
		cfg.Logger.Info("created the table", "table", cfg.Table.String(), "columns", t.schema.SQL(), "from", t.from)
		if info, err := tgt.Describe(ctx, cfg.Table); err == nil {
			t.id = info.ID
		} else if !errors.Is(err, flightclient.ErrUnsupported) {
			return nil, fmt.Errorf("describe %s after creating it: %w", cfg.Table, err)
		}
		return t, nil
	case errors.Is(err, flightclient.ErrTableNotFound):
		return nil, &TableNotFoundError{Table: cfg.Table.String(), Target: tgt.String(), Err: err}
	case errors.Is(err, flightclient.ErrUnsupported):
		t, aerr := assumed()
		if aerr != nil {
			return nil, aerr
		}
		cfg.Logger.Info("the target cannot describe tables; assuming the table's columns",
			"table", cfg.Table.String(), "columns", t.schema.SQL(), "from", t.from)
		if cfg.CreateTable && create {
			// The table may or may not exist: ask to create it, which leaves an existing one alone.
			if err := tgt.Create(ctx, cfg.Table, t.schema); err != nil {
				return nil, createError(cfg, err)
			}
		}
		return t, nil
	}
	return nil, fmt.Errorf("describe %s: %w", cfg.Table, err)
}

// createError explains a failed create; a target that cannot create tables is a configuration
// error (the load asked for something the target does not do).
func createError(cfg *Config, err error) error {
	if errors.Is(err, flightclient.ErrUnsupported) {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return fmt.Errorf("create %s: %w", cfg.Table, err)
}

// TableNotFoundError is a table the target does not have (and was not asked to create).
type TableNotFoundError struct {
	Table, Target string
	Err           error
}

func (e *TableNotFoundError) Error() string {
	return fmt.Sprintf("table %s does not exist on %s", e.Table, e.Target)
}

func (e *TableNotFoundError) Unwrap() error { return e.Err }

// LossyDescriptionError is a file refused against the columns the target described, where that
// description looks lossy: a STRING column where the file has a nested type, or every column
// nullable although the file says some are not. Some servers describe tables so (a VARCHAR[]
// reported as utf8); the table's real columns can be given instead (Config.TableSchema).
type LossyDescriptionError struct {
	Table     string
	Described string   // the columns as the target described them
	Signs     []string // what looks lossy
	Err       error    // the refusal (a *schemamatch.MismatchError)
}

func (e *LossyDescriptionError) Error() string {
	return fmt.Sprintf("%v\n  the target described %s as (%s), which looks lossy: %s",
		e.Err, e.Table, e.Described, strings.Join(e.Signs, "; "))
}

func (e *LossyDescriptionError) Unwrap() error { return e.Err }

// defaultStateDir is $XDG_STATE_HOME/loader/manifests, else ~/.local/state/loader/manifests: state
// that must outlive caches but is not configuration.
// DefaultManifestDir is where manifests go when neither Config.ManifestDir nor the target (the
// embedded sink keeps them in its warehouse) says: $XDG_STATE_HOME/loader/manifests, else
// ~/.local/state/loader/manifests.
func DefaultManifestDir() string { return defaultStateDir() }

func defaultStateDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "loader", "manifests")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "state", "loader", "manifests")
	}
	return filepath.Join(".loader", "manifests")
}

// manifestDir is where the load's manifest lives: Config.ManifestDir, else the target's own place,
// else the user's state directory.
func manifestDir(cfg *Config, tgt Target) string {
	if cfg.ManifestDir != "" {
		return cfg.ManifestDir
	}
	if md, ok := tgt.(interface{ ManifestDir() string }); ok {
		return md.ManifestDir()
	}
	return defaultStateDir()
}

// manifestKey identifies target and table in the manifest's name.
func manifestKey(tgt Target, t *table) string {
	if t.id == "" {
		return tgt.String()
	}
	return tgt.String() + "#" + t.id
}
