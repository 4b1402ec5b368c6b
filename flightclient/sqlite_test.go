package flightclient_test

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql/example"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/loaderproject/loader/flightclient"
	"github.com/loaderproject/loader/tableschema"
	"github.com/loaderproject/loader/zerobus"
)

// sqliteServer serves arrow-go's example Flight SQL server, backed by an in-memory SQLite database: an
// independent implementation of GetTables, GetSqlInfo and statements, so the client is not proven
// only against our own server. Its database holds intTable (4 rows) and foreignTable (3 rows); it has
// one catalog, "main", and no schemas.
func sqliteServer(t *testing.T) (string, *flightsql.Client) {
	t.Helper()
	db, err := example.CreateDB()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	srv, err := example.NewSQLiteFlightSQLServer(db)
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, flightsql.NewFlightServer(srv))
	cl, err := flightsql.NewClient(addr, nil, nil, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return "grpc://" + addr, cl
}

func TestFlightSQLAgainstSQLite(t *testing.T) {
	endpoint, sql := sqliteServer(t)
	c := testClient(t, endpoint, flightclient.FlightSQL)
	intTable := tableschema.TableName{Catalog: "main", Schema: "default", Table: "intTable"}

	info, err := c.Describe(t.Context(), intTable)
	if err != nil {
		t.Fatalf("Describe(%s) = %v", intTable, err)
	}
	want := mustColumns("id BIGINT NOT NULL, keyName STRING, value BIGINT, foreignId BIGINT")
	if !info.Schema.Equal(want) {
		t.Errorf("Describe(%s) = %s; want %s", intTable, info.Schema.SQL(), want.SQL())
	}

	n, err := c.Count(t.Context(), intTable)
	if err != nil || n != 4 {
		t.Fatalf("Count(%s) = %d, %v; want 4", intTable, n, err)
	}
	if _, err := sql.ExecuteUpdate(t.Context(), "INSERT INTO intTable (keyName, value) VALUES ('five', 5)"); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Count(t.Context(), intTable); err != nil || n != 5 {
		t.Errorf("Count(%s) after an insert = %d, %v; want 5", intTable, n, err)
	}
	// A client that never described the table learns its name before counting.
	fresh := testClient(t, endpoint, flightclient.FlightSQL)
	foreign := tableschema.TableName{Catalog: "main", Schema: "default", Table: "foreignTable"}
	if n, err := fresh.Count(t.Context(), foreign); err != nil || n != 3 {
		t.Errorf("Count(%s) = %d, %v; want 3", foreign, n, err)
	}

	for _, missing := range []tableschema.TableName{
		{Catalog: "main", Schema: "default", Table: "nope"},
		{Catalog: "other", Schema: "default", Table: "intTable"}, // SQLite's one catalog is "main"
	} {
		if _, err := c.Describe(t.Context(), missing); !errors.Is(err, flightclient.ErrTableNotFound) {
			t.Errorf("Describe(%s) = %v; want ErrTableNotFound", missing, err)
		}
	}
	// The example server has no bulk ingest: creating a table is not supported, and says so.
	err = c.Create(t.Context(), tableschema.TableName{Catalog: "main", Schema: "default", Table: "fresh"}, arrowSchema())
	if !errors.Is(err, flightclient.ErrUnsupported) || !strings.Contains(err.Error(), "Unimplemented") {
		t.Errorf("Create() = %v; want ErrUnsupported quoting Unimplemented", err)
	}
}

// TestFlightSQLCreate: Create sends one ingest call of no rows that creates the table or appends
// to it.
func TestFlightSQLCreate(t *testing.T) {
	mem := checked(t)
	srv := newSQLServer(mem)
	c := testClient(t, srv.start(t), flightclient.FlightSQL)
	if err := c.Create(t.Context(), tableName, arrowSchema()); err != nil {
		t.Fatalf("Create() = %v", err)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if len(srv.cmds) != 1 || len(srv.frames) != 1 || srv.frames[0] != 0 {
		t.Fatalf("%d calls with %v frames; want one call of no frames", len(srv.cmds), srv.frames)
	}
	opts := srv.cmds[0].GetTableDefinitionOptions()
	if opts.GetIfNotExist() != flightsql.TableDefinitionOptionsTableNotExistOptionCreate ||
		opts.GetIfExists() != flightsql.TableDefinitionOptionsTableExistsOptionAppend || srv.cmds[0].GetTable() != tableName.Table {
		t.Errorf("CommandStatementIngest %v; want %s, create / append", srv.cmds[0], tableName)
	}
}

// garbageResultServer answers every DoPut, once the client half-closed, with a PutResult whose
// app_metadata is not a DoPutUpdateResult.
type garbageResultServer struct{ flight.BaseFlightServer }

func (*garbageResultServer) DoPut(stream flight.FlightService_DoPutServer) error {
	for {
		if _, err := stream.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return err
		}
	}
	return stream.Send(&flight.PutResult{AppMetadata: []byte{0xff, 0xff, 0xff}})
}

func TestFlightSQLBadPutResult(t *testing.T) {
	mem := checked(t)
	addr := serve(t, &garbageResultServer{})
	fx := newFixture(t, mem, 100, 1<<20)
	c := testClient(t, "grpc://"+addr, flightclient.FlightSQL)
	stats, log, err := load(t.Context(), t, c, fx, 1)
	if !errors.Is(err, zerobus.ErrProtocol) || !strings.Contains(err.Error(), "DoPutUpdateResult") {
		t.Fatalf("Load() = %v; want a protocol error naming DoPutUpdateResult", err)
	}
	if stats.Retries != 0 || len(log.frames) != 0 {
		t.Errorf("Stats.Retries = %d, %d frames reported; want none (fatal, nothing acknowledged)", stats.Retries, len(log.frames))
	}
}

func TestUserAgent(t *testing.T) {
	mem := checked(t)
	srv := newServer(t, mem)
	srv.start(t)
	fx := newFixture(t, mem, 10, 1<<20)
	c := testClient(t, srv.endpoint(), flightclient.Zerobus, flightclient.WithUserAgent("loader/9.8.7"))
	loadAll(t.Context(), t, c, fx, 1)
	if ua := srv.call(0).md.Get("user-agent"); len(ua) != 1 || !strings.HasPrefix(ua[0], "loader/9.8.7 ") {
		t.Errorf("user-agent %q; want it to start with loader/9.8.7", ua)
	}
}
