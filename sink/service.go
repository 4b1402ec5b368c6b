package sink

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/util"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/loaderproject/loader/internal/ipcguard"
	"github.com/loaderproject/loader/internal/sinkapi"
	"github.com/loaderproject/loader/tableschema"
	"github.com/loaderproject/loader/warehouse"
	"github.com/loaderproject/loader/zerobus"
)

// doGetMessageBytes is the rough size DoGet slices committed batches to, so clients with gRPC's
// default 4 MiB receive limit can read any table.
const doGetMessageBytes = 1 << 20

// service is the Flight service: it serves what the sink knows and hands the rest to Flight SQL.
type service struct {
	flight.BaseFlightServer
	s *Server
}

var _ flight.FlightServer = (*service)(nil)

// tableStatus maps warehouse and context errors to gRPC statuses.
func tableStatus(name tableschema.TableName, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, warehouse.ErrTableNotFound):
		return status.Errorf(codes.NotFound, "table %s does not exist", name)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Errorf(codes.Internal, "table %s: %v", name, err)
}

// parsePath reads a PATH descriptor [catalog, schema, table].
func parsePath(path []string) (tableschema.TableName, error) {
	if len(path) != 3 {
		return tableschema.TableName{}, status.Errorf(codes.InvalidArgument,
			"FlightDescriptor PATH has %d elements; want [catalog, schema, table]", len(path))
	}
	name, err := tableschema.ParseTableName(strings.Join(path, "."))
	if err != nil {
		return tableschema.TableName{}, status.Errorf(codes.InvalidArgument, "FlightDescriptor PATH: %v", err)
	}
	return name, nil
}

// DoPut dispatches: the Zerobus header, else the first FlightData's descriptor (PATH: plain Flight,
// CMD: Flight SQL).
func (svc *service) DoPut(stream flight.FlightService_DoPutServer) error {
	s := svc.s
	if s.faults.takeUnavailable() {
		return status.Error(codes.Unavailable, "sink fault injection: call refused (unavailable_calls)")
	}
	if s.cfg.streamRate > 0 {
		stream = newThrottledStream(stream, s.cfg.streamRate)
	}
	ctx := stream.Context()
	md, _ := metadata.FromIncomingContext(ctx)
	if vals := md.Get(zerobus.HeaderTableName); len(vals) > 0 {
		for _, v := range vals[1:] {
			if strings.TrimSpace(v) != strings.TrimSpace(vals[0]) {
				return status.Errorf(codes.InvalidArgument, "header %s is given %d times with different values; want one table", zerobus.HeaderTableName, len(vals))
			}
		}
		raw := strings.TrimSpace(vals[0])
		name, err := tableschema.ParseTableName(raw)
		if err != nil {
			return status.Errorf(codes.InvalidArgument, "header %s: %v", zerobus.HeaderTableName, err)
		}
		ts, err := s.table(ctx, name)
		if err != nil {
			return tableStatus(name, err)
		}
		first, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return status.Error(codes.InvalidArgument, "the stream ended before its schema frame")
			}
			return err
		}
		return s.ingest(stream, ts, first, dialectZerobus)
	}

	first, err := stream.Recv()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return status.Errorf(codes.InvalidArgument, "DoPut without the %s header and without any FlightData", zerobus.HeaderTableName)
		}
		return err
	}
	desc := first.GetFlightDescriptor()
	switch {
	case desc != nil && desc.GetType() == flight.DescriptorPATH:
		name, err := parsePath(desc.GetPath())
		if err != nil {
			return err
		}
		ts, err := s.table(ctx, name)
		if err != nil {
			return tableStatus(name, err)
		}
		return s.ingest(stream, ts, first, dialectFlight)
	case desc != nil && desc.GetType() == flight.DescriptorCMD:
		// A router of its own, whose allocator bounds what decoding this call may take, as the
		// Zerobus decoder's does: a compressed buffer claiming terabytes must fail the call, not
		// crash the process (Go cannot recover from running out of memory).
		sql := flightsql.NewFlightServerWithAllocator(s.sqlq, newLimitedAllocator(s.cfg.mem, maxDecodedFrameBytes))
		return sql.DoPut(&replayStream{FlightService_DoPutServer: stream, first: first})
	}
	return status.Errorf(codes.InvalidArgument,
		"missing %s header: a Zerobus DoPut names its table in that header; a plain Flight DoPut needs a PATH descriptor [catalog, schema, table], a Flight SQL one a CMD descriptor",
		zerobus.HeaderTableName)
}

// replayStream hands Flight SQL the first message again, and screens every IPC header before
// arrow-go decodes it (ipcguard.CheckMessage).
type replayStream struct {
	flight.FlightService_DoPutServer
	first *flight.FlightData
	n     int
}

func (r *replayStream) Recv() (*flight.FlightData, error) {
	fd := r.first
	if fd != nil {
		r.first = nil
	} else {
		var err error
		if fd, err = r.FlightService_DoPutServer.Recv(); err != nil {
			return nil, err
		}
	}
	r.n++
	if h := fd.GetDataHeader(); len(h) > 0 {
		if _, err := ipcguard.CheckMessage(h); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "FlightData #%d: data_header is not a valid IPC message: %v", r.n, err)
		}
	}
	return fd, nil
}

// DoGet streams a table's committed rows when the ticket is a table name, else defers to Flight SQL.
func (svc *service) DoGet(tkt *flight.Ticket, stream flight.FlightService_DoGetServer) error {
	name, err := tableschema.ParseTableName(string(tkt.GetTicket()))
	if err != nil {
		return svc.s.sql.DoGet(tkt, stream)
	}
	ctx := stream.Context()
	t, err := svc.s.wh.Table(ctx, name)
	if err != nil {
		return tableStatus(name, err)
	}
	schema, err := t.Schema(ctx)
	if err != nil {
		return tableStatus(name, err)
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(schema.Arrow()), ipc.WithAllocator(svc.s.cfg.mem))
	defer w.Close()
	err = t.Scan(ctx, func(rec arrow.RecordBatch) error {
		n := rec.NumRows()
		if n == 0 {
			return nil
		}
		per := max(int64(1), int64(float64(n)*doGetMessageBytes/float64(max(util.TotalRecordSize(rec), 1))))
		for off := int64(0); off < n; off += per {
			part := rec.NewSlice(off, min(off+per, n))
			err := w.Write(part)
			part.Release()
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return tableStatus(name, err)
	}
	return w.Close()
}

// flightInfo describes a table: canonical schema, one endpoint whose ticket is its name, its
// committed row count and data size.
func (svc *service) flightInfo(ctx context.Context, name tableschema.TableName) (*flight.FlightInfo, error) {
	t, err := svc.s.wh.Table(ctx, name)
	if err != nil {
		return nil, tableStatus(name, err)
	}
	snap, err := t.Snapshot(ctx)
	if err != nil {
		return nil, tableStatus(name, err)
	}
	var size int64
	for _, f := range snap.Files {
		size += f.Size
	}
	return &flight.FlightInfo{
		Schema:           flight.SerializeSchema(snap.Schema.Arrow(), svc.s.cfg.mem),
		FlightDescriptor: &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: name.Parts()},
		Endpoint:         []*flight.FlightEndpoint{{Ticket: &flight.Ticket{Ticket: []byte(name.String())}}},
		TotalRecords:     snap.NumRecords,
		TotalBytes:       size,
	}, nil
}

// GetFlightInfo describes a table for a PATH descriptor, else defers to Flight SQL.
func (svc *service) GetFlightInfo(ctx context.Context, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	if desc.GetType() != flight.DescriptorPATH {
		return svc.s.sql.GetFlightInfo(ctx, desc)
	}
	name, err := parsePath(desc.GetPath())
	if err != nil {
		return nil, err
	}
	return svc.flightInfo(ctx, name)
}

// GetSchema returns a table's canonical schema for a PATH descriptor, else defers to Flight SQL.
func (svc *service) GetSchema(ctx context.Context, desc *flight.FlightDescriptor) (*flight.SchemaResult, error) {
	if desc.GetType() != flight.DescriptorPATH {
		return svc.s.sql.GetSchema(ctx, desc)
	}
	name, err := parsePath(desc.GetPath())
	if err != nil {
		return nil, err
	}
	t, err := svc.s.wh.Table(ctx, name)
	if err != nil {
		return nil, tableStatus(name, err)
	}
	schema, err := t.Schema(ctx)
	if err != nil {
		return nil, tableStatus(name, err)
	}
	return &flight.SchemaResult{Schema: flight.SerializeSchema(schema.Arrow(), svc.s.cfg.mem)}, nil
}

// PollFlightInfo defers to Flight SQL.
func (svc *service) PollFlightInfo(ctx context.Context, desc *flight.FlightDescriptor) (*flight.PollInfo, error) {
	return svc.s.sql.PollFlightInfo(ctx, desc)
}

// ListFlights lists every table; a non-empty criteria expression keeps the names starting with it.
func (svc *service) ListFlights(c *flight.Criteria, stream flight.FlightService_ListFlightsServer) error {
	ctx := stream.Context()
	names, err := svc.s.wh.List(ctx)
	if err != nil {
		return status.Errorf(codes.Internal, "list tables: %v", err)
	}
	prefix := string(c.GetExpression())
	for _, name := range names {
		if !strings.HasPrefix(name.String(), prefix) {
			continue
		}
		info, err := svc.flightInfo(ctx, name)
		if status.Code(err) == codes.NotFound {
			continue // dropped while listing
		}
		if err != nil {
			return err
		}
		if err := stream.Send(info); err != nil {
			return err
		}
	}
	return nil
}

var sinkActions = []*flight.ActionType{
	{Type: sinkapi.ActionCount, Description: "Body: a table name. Result: JSON {table, committed, acknowledged, version}."},
	{Type: sinkapi.ActionFlush, Description: "Body: a table name. Commits every acknowledged row now. Result: as " + sinkapi.ActionCount + "."},
	{Type: sinkapi.ActionDescribe, Description: "Body: a table name. Result: JSON {table, id, columns, delta_schema}."},
	{Type: sinkapi.ActionUnitIDs, Description: "Body: a table name. Result: JSON {table, unit_ids}: whether data frames tagged with unit ids are stored once."},
	{Type: sinkapi.ActionFaults, Description: "Body: a JSON fault set (drop_after_frames, drop_calls, ack_delay, rotate_after_frames, rotate_grace, unavailable_calls; durations in ns). Installs it and returns it."},
}

// ListActions lists the sink's actions, then Flight SQL's.
func (svc *service) ListActions(e *flight.Empty, stream flight.FlightService_ListActionsServer) error {
	for _, a := range sinkActions {
		if err := stream.Send(a); err != nil {
			return err
		}
	}
	return svc.s.sql.ListActions(e, stream)
}

// DoAction serves the sinkapi actions and defers the others to Flight SQL.
func (svc *service) DoAction(a *flight.Action, stream flight.FlightService_DoActionServer) error {
	ctx := stream.Context()
	var (
		body any
		err  error
	)
	switch a.GetType() {
	case sinkapi.ActionCount, sinkapi.ActionFlush, sinkapi.ActionDescribe:
		name, perr := tableschema.ParseTableName(strings.TrimSpace(string(a.GetBody())))
		if perr != nil {
			return status.Errorf(codes.InvalidArgument, "action %s: body: %v", a.GetType(), perr)
		}
		if svc.s.cfg.discard && a.GetType() != sinkapi.ActionDescribe {
			// Nothing is stored, so nothing can be counted: clients treat Unimplemented as "this
			// target cannot count" and skip verification instead of reporting a mismatch.
			return status.Errorf(codes.Unimplemented, "action %s: the sink discards what it receives and stores nothing to count", a.GetType())
		}
		switch a.GetType() {
		case sinkapi.ActionCount:
			body, err = svc.s.count(ctx, name)
		case sinkapi.ActionFlush:
			if err = svc.s.Flush(ctx, name); err == nil {
				body, err = svc.s.count(ctx, name)
			}
		default:
			body, err = svc.describe(ctx, name)
		}
		if err != nil {
			return tableStatus(name, err)
		}
	case sinkapi.ActionUnitIDs:
		name, perr := tableschema.ParseTableName(strings.TrimSpace(string(a.GetBody())))
		if perr != nil {
			return status.Errorf(codes.InvalidArgument, "action %s: body: %v", a.GetType(), perr)
		}
		body = sinkapi.UnitIDsResult{Table: name.String(), UnitIDs: !svc.s.cfg.discard && !svc.s.cfg.noUnitIDs}
	case sinkapi.ActionFaults:
		if !svc.s.cfg.testFaults {
			return status.Errorf(codes.PermissionDenied, "action %s: fault injection is off; it is served only by a sink started for tests (loader serve --test-faults)", a.GetType())
		}
		var f Faults
		if err := json.Unmarshal(a.GetBody(), &f); err != nil {
			return status.Errorf(codes.InvalidArgument, "action %s: body is not a fault set: %v", a.GetType(), err)
		}
		svc.s.SetFaults(f)
		body = f
	default:
		return svc.s.sql.DoAction(a, stream)
	}
	out, err := json.Marshal(body)
	if err != nil {
		return status.Errorf(codes.Internal, "action %s: %v", a.GetType(), err)
	}
	return stream.Send(&flight.Result{Body: out})
}

// count is ActionCount: committed rows plus rows acknowledged but not yet committed.
func (s *Server) count(ctx context.Context, name tableschema.TableName) (sinkapi.CountResult, error) {
	res := sinkapi.CountResult{Table: name.String()}
	ts, err := s.openIfLogged(ctx, name)
	if err != nil {
		return res, err
	}
	if ts != nil {
		res.Committed, res.Version, res.Acknowledged, err = ts.counts(ctx)
		return res, err
	}
	t, err := s.wh.Table(ctx, name)
	if err != nil {
		return res, err
	}
	res.Committed, res.Version, err = t.Count(ctx)
	return res, err
}

func (svc *service) describe(ctx context.Context, name tableschema.TableName) (sinkapi.TableInfo, error) {
	t, err := svc.s.wh.Table(ctx, name)
	if err != nil {
		return sinkapi.TableInfo{}, err
	}
	snap, err := t.Snapshot(ctx)
	if err != nil {
		return sinkapi.TableInfo{}, err
	}
	return sinkapi.TableInfo{
		Table:       name.String(),
		ID:          snap.ID,
		Columns:     snap.Schema.SQL(),
		DeltaSchema: snap.Schema.DeltaJSON(),
	}, nil
}
