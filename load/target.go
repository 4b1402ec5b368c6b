package load

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/loaderproject/loader/flightclient"
	"github.com/loaderproject/loader/sink"
	"github.com/loaderproject/loader/tableschema"
	"github.com/loaderproject/loader/warehouse"
)

// target is the table being loaded and the client that reaches it.
type target struct {
	client      *flightclient.Client
	schema      *tableschema.Schema
	key         string // identifies target and table in the manifest's name
	manifestDir string
	describe    string // for the summary: "embedded:<dir>" or the endpoint
	createdFrom string // the file --create-table derived the table from in this run, if it did
	close       func(context.Context) error
}

func clientOptions(cfg *Config) []flightclient.Option {
	opts := []flightclient.Option{
		flightclient.WithConnections(cfg.Connections),
		flightclient.WithMaxFrameBytes(cfg.MaxFrameBytes),
		flightclient.WithLogger(cfg.Logger),
	}
	if cfg.Token != "" {
		opts = append(opts, flightclient.WithToken(cfg.Token))
	}
	return opts
}

// openEmbedded starts the embedded sink over cfg.Warehouse on a loopback port, creating the table from
// the first file's schema when asked to.
func openEmbedded(ctx context.Context, cfg *Config, firstFile string, firstSchema func() (*arrow.Schema, error)) (*target, error) {
	createdFrom := ""
	wh, err := warehouse.Open(cfg.Warehouse)
	if err != nil {
		return nil, fmt.Errorf("warehouse %s: %w", cfg.Warehouse, err)
	}
	tbl, err := wh.Table(ctx, cfg.Table)
	if errors.Is(err, warehouse.ErrTableNotFound) {
		if !cfg.CreateTable {
			return nil, fmt.Errorf("table %s does not exist in warehouse %s: create it with `loader table create` or pass --create-table: %w",
				cfg.Table, cfg.Warehouse, err)
		}
		tbl, err = createFromFirstFile(ctx, wh, cfg.Table, firstFile, firstSchema)
		createdFrom = firstFile
	}
	if err != nil {
		return nil, err
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("table %s: %w", cfg.Table, err)
	}
	opts := []sink.Option{sink.WithLogger(cfg.Logger)}
	if cfg.CommitInterval > 0 {
		opts = append(opts, sink.WithCommitInterval(cfg.CommitInterval))
	}
	srv := sink.New(wh, opts...)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("embedded sink: %w", err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	select {
	case <-srv.Ready():
	case err := <-served:
		return nil, fmt.Errorf("embedded sink: %w", err)
	case <-ctx.Done():
		return nil, errors.Join(ctx.Err(), srv.Shutdown(context.Background()), <-served)
	}
	shutdown := func(ctx context.Context) error {
		err := srv.Shutdown(ctx)
		return errors.Join(err, <-served)
	}
	client, err := flightclient.New("grpc://"+lis.Addr().String(), cfg.Protocol, clientOptions(cfg)...)
	if err != nil {
		return nil, errors.Join(err, shutdown(context.Background()))
	}
	abs, err := filepath.Abs(cfg.Warehouse)
	if err != nil {
		abs = cfg.Warehouse
	}
	return &target{
		client:      client,
		schema:      snap.Schema,
		key:         "embedded:" + abs + "#" + snap.ID,
		manifestDir: filepath.Join(cfg.Warehouse, ".loader", "manifests"),
		describe:    "embedded:" + cfg.Warehouse,
		createdFrom: createdFrom,
		close: func(ctx context.Context) error {
			return errors.Join(client.Close(), shutdown(ctx))
		},
	}, nil
}

func createFromFirstFile(ctx context.Context, wh *warehouse.Warehouse, name tableschema.TableName,
	firstFile string, firstSchema func() (*arrow.Schema, error)) (*warehouse.Table, error) {
	src, err := firstSchema()
	if err != nil {
		if !strings.Contains(err.Error(), firstFile) {
			err = fmt.Errorf("%s: %w", firstFile, err)
		}
		return nil, fmt.Errorf("--create-table: %w", err)
	}
	schema, err := tableschema.FromArrow(src)
	if err != nil {
		return nil, fmt.Errorf("--create-table from %s: %w", firstFile, err)
	}
	tbl, err := wh.CreateTable(ctx, name, schema)
	if errors.Is(err, warehouse.ErrTableExists) { // created by someone else meanwhile
		return wh.Table(ctx, name)
	}
	return tbl, err
}

// openRemote prepares a client for cfg.Endpoint and learns the table's schema from the target, from
// cfg.TableSchema, or, failing both, from the first file.
func openRemote(ctx context.Context, cfg *Config, firstSchema func() (*arrow.Schema, error)) (*target, error) {
	if cfg.CreateTable {
		return nil, errors.Join(ErrConfig, errors.New("--create-table works with the embedded sink only (no --endpoint); create the table on the target first"))
	}
	client, err := flightclient.New(cfg.Endpoint, cfg.Protocol, clientOptions(cfg)...)
	if err != nil {
		return nil, err
	}
	t := &target{client: client, describe: cfg.Endpoint, close: func(context.Context) error { return client.Close() }}
	info, err := client.Describe(ctx, cfg.Table)
	switch {
	case err == nil:
		t.schema = info.Schema
		t.key = string(cfg.Protocol) + ":" + cfg.Endpoint + "#" + info.ID
	case errors.Is(err, flightclient.ErrUnsupported):
		t.key = string(cfg.Protocol) + ":" + cfg.Endpoint
		if t.schema = cfg.TableSchema; t.schema == nil {
			src, err := firstSchema()
			if err != nil {
				client.Close()
				return nil, err
			}
			if t.schema, err = tableschema.FromArrow(src); err != nil {
				client.Close()
				return nil, fmt.Errorf("the target cannot describe %s and the first file has no canonical table schema (give --table-schema): %w", cfg.Table, err)
			}
			cfg.Logger.Info("target cannot describe tables; assuming the first file's canonical schema", "table", cfg.Table.String(), "columns", t.schema.SQL())
		}
	default:
		client.Close()
		return nil, fmt.Errorf("describe %s: %w", cfg.Table, err)
	}
	t.manifestDir = cfg.ManifestDir
	if t.manifestDir == "" {
		t.manifestDir = defaultStateDir()
	}
	return t, nil
}

// defaultStateDir is $XDG_STATE_HOME/loader/manifests, else ~/.local/state/loader/manifests: state
// that must outlive caches but is not configuration.
func defaultStateDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "loader", "manifests")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "state", "loader", "manifests")
	}
	return filepath.Join(".loader", "manifests")
}
