// Package embedded is the loader's default target: the embedded sink (package sink) serving a
// warehouse of Delta tables (package warehouse) in-process on a loopback port, behind the same
// interface as a remote endpoint (load.Target).
//
// A Target does nothing until it is used. Describe and Create work on the warehouse directly, so a
// dry run starts no server (and Describe on a warehouse directory that does not exist creates
// nothing). Count and Streams start the sink on first use: its recovery commits whatever an earlier
// run's log acknowledged, before anything is counted. Close shuts the sink down, which commits every
// acknowledged row.
//
// A Target is safe for concurrent use.
package embedded

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/loaderproject/loader/flightclient"
	"github.com/loaderproject/loader/sink"
	"github.com/loaderproject/loader/tableschema"
	"github.com/loaderproject/loader/warehouse"
)

// DefaultWarehouse is the warehouse directory used when none is given.
const DefaultWarehouse = "warehouse"

// Option configures a Target.
type Option func(*config)

type config struct {
	protocol       flightclient.Dialect
	commitInterval time.Duration
	logger         *slog.Logger
}

// WithProtocol sets the dialect the load's streams speak to the sink (it serves all three). Default
// flightclient.Zerobus; an empty value keeps the default, an unknown one fails Streams.
func WithProtocol(d flightclient.Dialect) Option {
	return func(c *config) {
		if d != "" {
			c.protocol = d
		}
	}
}

// WithCommitInterval sets how often the sink commits acknowledged rows to Delta. Default: the sink's
// (1 s); values below 1 keep it.
func WithCommitInterval(d time.Duration) Option {
	return func(c *config) { c.commitInterval = d }
}

// WithLogger sets the sink's logger. Default: discard; nil keeps the default.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}

// Target is the embedded sink over one warehouse directory.
type Target struct {
	dir string // as given
	abs string // absolute, for the target's identity
	cfg config

	mu      sync.Mutex
	wh      *warehouse.Warehouse
	srv     *sink.Server
	served  chan error
	addr    string
	clients []*flightclient.Client
}

// New returns the target over the warehouse at dir (DefaultWarehouse when empty). It does no I/O.
func New(dir string, opts ...Option) *Target {
	if dir == "" {
		dir = DefaultWarehouse
	}
	cfg := config{protocol: flightclient.Zerobus, logger: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(&cfg)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	return &Target{dir: dir, abs: abs, cfg: cfg}
}

// String identifies the target: "embedded:" and the warehouse's absolute path.
func (t *Target) String() string { return "embedded:" + t.abs }

// ManifestDir is where a load keeps the manifests of this warehouse's tables: inside it, so they go
// away with it.
func (t *Target) ManifestDir() string { return filepath.Join(t.dir, ".loader", "manifests") }

// warehouse opens the warehouse (creating its directory) once.
func (t *Target) warehouse() (*warehouse.Warehouse, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.warehouseLocked()
}

func (t *Target) warehouseLocked() (*warehouse.Warehouse, error) {
	if t.wh != nil {
		return t.wh, nil
	}
	wh, err := warehouse.Open(t.dir)
	if err != nil {
		return nil, fmt.Errorf("warehouse %s: %w", t.dir, err)
	}
	t.wh = wh
	return wh, nil
}

// notFound is the error for a table the warehouse lacks: it matches both flightclient's and
// warehouse's ErrTableNotFound.
func (t *Target) notFound(name tableschema.TableName, err error) error {
	return fmt.Errorf("%w: table %s is not in warehouse %s: %w", flightclient.ErrTableNotFound, name, t.dir, err)
}

// Describe returns the table's schema, and its Delta table id as its identity.
func (t *Target) Describe(ctx context.Context, name tableschema.TableName) (flightclient.TableInfo, error) {
	if err := ctx.Err(); err != nil {
		return flightclient.TableInfo{}, err
	}
	if _, err := os.Stat(t.dir); errors.Is(err, fs.ErrNotExist) {
		return flightclient.TableInfo{}, t.notFound(name, warehouse.ErrTableNotFound)
	}
	wh, err := t.warehouse()
	if err != nil {
		return flightclient.TableInfo{}, err
	}
	tbl, err := wh.Table(ctx, name)
	if errors.Is(err, warehouse.ErrTableNotFound) {
		return flightclient.TableInfo{}, t.notFound(name, err)
	}
	if err != nil {
		return flightclient.TableInfo{}, err
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		return flightclient.TableInfo{}, fmt.Errorf("table %s: %w", name, err)
	}
	return flightclient.TableInfo{ID: snap.ID, Schema: snap.Schema}, nil
}

// Create creates the table with schema unless it exists.
func (t *Target) Create(ctx context.Context, name tableschema.TableName, schema *tableschema.Schema) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	wh, err := t.warehouse()
	if err != nil {
		return err
	}
	if _, err := wh.CreateTable(ctx, name, schema); err != nil && !errors.Is(err, warehouse.ErrTableExists) {
		return err
	}
	return nil
}

// Count commits the table's acknowledged rows and returns its committed row count. It starts the
// sink, whose recovery commits what an earlier run acknowledged.
func (t *Target) Count(ctx context.Context, name tableschema.TableName) (int64, error) {
	srv, wh, err := t.start(ctx)
	if err != nil {
		return 0, err
	}
	if err := srv.Flush(ctx, name); err != nil {
		if errors.Is(err, warehouse.ErrTableNotFound) {
			return 0, t.notFound(name, err)
		}
		return 0, err
	}
	tbl, err := wh.Table(ctx, name)
	if err != nil {
		if errors.Is(err, warehouse.ErrTableNotFound) {
			return 0, t.notFound(name, err)
		}
		return 0, err
	}
	n, _, err := tbl.Count(ctx)
	return n, err
}

// Streams starts the sink if it is not running and returns a client to it in the target's
// protocol, made with opts. The target closes the client in Close.
func (t *Target) Streams(ctx context.Context, opts ...flightclient.Option) (*flightclient.Client, error) {
	if _, _, err := t.start(ctx); err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	c, err := flightclient.New("grpc://"+t.addr, t.cfg.protocol, opts...)
	if err != nil {
		return nil, err
	}
	t.clients = append(t.clients, c)
	return c, nil
}

// start runs the sink on a loopback port once: it returns when the sink's recovery is done and it
// accepts calls.
func (t *Target) start(ctx context.Context) (*sink.Server, *warehouse.Warehouse, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.srv != nil {
		return t.srv, t.wh, nil
	}
	wh, err := t.warehouseLocked()
	if err != nil {
		return nil, nil, err
	}
	opts := []sink.Option{sink.WithLogger(t.cfg.logger)}
	if t.cfg.commitInterval > 0 {
		opts = append(opts, sink.WithCommitInterval(t.cfg.commitInterval))
	}
	srv := sink.New(wh, opts...)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, fmt.Errorf("embedded sink: %w", err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	select {
	case <-srv.Ready():
	case err := <-served:
		return nil, nil, fmt.Errorf("embedded sink: %w", err)
	case <-ctx.Done():
		return nil, nil, errors.Join(ctx.Err(), srv.Shutdown(context.Background()), <-served)
	}
	t.srv, t.served, t.addr = srv, served, lis.Addr().String()
	return srv, wh, nil
}

// Close closes the clients Streams made and shuts the sink down, committing every acknowledged
// row; if ctx ends first, calls still running are cut off (what they acknowledged stays durable in
// the log and is committed on the next start).
func (t *Target) Close(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var errs []error
	for _, c := range t.clients {
		errs = append(errs, c.Close())
	}
	t.clients = nil
	if t.srv != nil {
		errs = append(errs, t.srv.Shutdown(ctx), <-t.served)
		t.srv = nil
	}
	return errors.Join(errs...)
}
