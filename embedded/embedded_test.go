package embedded_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/loaderproject/loader/embedded"
	"github.com/loaderproject/loader/flightclient"
	"github.com/loaderproject/loader/tableschema"
	"github.com/loaderproject/loader/warehouse"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var name = tableschema.TableName{Catalog: "main", Schema: "default", Table: "t"}

// TestDescribeCreatesNothing: describing a table of a warehouse that does not exist is "not found",
// and leaves no directory behind (a dry run must not write).
func TestDescribeCreatesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wh")
	tgt := embedded.New(dir)
	defer tgt.Close(t.Context())
	_, err := tgt.Describe(t.Context(), name)
	if !errors.Is(err, flightclient.ErrTableNotFound) || !errors.Is(err, warehouse.ErrTableNotFound) || !strings.Contains(err.Error(), dir) {
		t.Errorf("Describe() = %v; want both ErrTableNotFound, naming the warehouse", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Describe() created %s (%v)", dir, err)
	}
	if want := "embedded:" + dir; tgt.String() != want {
		t.Errorf("String() = %q; want %q", tgt.String(), want)
	}
}

// TestLifecycle: create, describe, count and stream, then close; Close twice is harmless, and a
// second Create of the same table is not an error.
func TestLifecycle(t *testing.T) {
	dir := t.TempDir()
	tgt := embedded.New(dir, embedded.WithProtocol(flightclient.FlightSQL))
	schema, err := tableschema.ParseColumns("id BIGINT NOT NULL, s STRING")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := tgt.Create(t.Context(), name, schema); err != nil {
			t.Fatalf("Create() = %v", err)
		}
	}
	info, err := tgt.Describe(t.Context(), name)
	if err != nil || !info.Schema.Equal(schema) || info.ID == "" {
		t.Fatalf("Describe() = %+v, %v; want the schema and a Delta id", info, err)
	}
	if n, err := tgt.Count(t.Context(), name); err != nil || n != 0 {
		t.Errorf("Count() = %d, %v; want 0", n, err)
	}
	c, err := tgt.Streams(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if c.Dialect() != flightclient.FlightSQL {
		t.Errorf("Streams() dialect %s; want flightsql", c.Dialect())
	}
	// The client reaches the running sink: the sink answers a Flight SQL count.
	if n, err := c.Count(t.Context(), name); err != nil || n != 0 {
		t.Errorf("Count over the streams' client = %d, %v; want 0", n, err)
	}
	other := tableschema.TableName{Catalog: "main", Schema: "default", Table: "nope"}
	if _, err := tgt.Count(t.Context(), other); !errors.Is(err, flightclient.ErrTableNotFound) {
		t.Errorf("Count(missing) = %v; want ErrTableNotFound", err)
	}
	if err := tgt.Close(t.Context()); err != nil {
		t.Errorf("Close() = %v", err)
	}
	if err := tgt.Close(t.Context()); err != nil {
		t.Errorf("second Close() = %v", err)
	}
	if got := tgt.ManifestDir(); got != filepath.Join(dir, ".loader", "manifests") {
		t.Errorf("ManifestDir() = %q", got)
	}
}

func TestPreCancelled(t *testing.T) {
	tgt := embedded.New(t.TempDir())
	defer tgt.Close(t.Context())
	ctx, cancel := contextCancelled(t)
	defer cancel()
	if _, err := tgt.Describe(ctx, name); err == nil {
		t.Error("Describe(cancelled) succeeded")
	}
	if _, err := tgt.Streams(ctx); err == nil {
		t.Error("Streams(cancelled) succeeded")
	}
}

func contextCancelled(t *testing.T) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	return ctx, cancel
}
