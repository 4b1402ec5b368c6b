package flightclient

import (
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow/flight"
	pb "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loaderproject/loader/tableschema"
	"github.com/loaderproject/loader/zerobus"
)

// protocol is what differs between the dialects on a DoPut: the first frame's descriptor, the call's
// headers, READY, the data frames' app_metadata, what a PutResult means and when a call's frames
// count as acknowledged. New chooses one; it holds no per-call state, so every stream shares it.
type protocol interface {
	// schemaFrame returns the first FlightData of every call: the IPC schema message schemaMsg, with
	// the dialect's descriptor if it has one.
	schemaFrame(table tableschema.TableName, schemaMsg []byte) (*flight.FlightData, error)
	// header adds the dialect's metadata to a call's outgoing metadata.
	header(md metadata.MD, table tableschema.TableName)
	// awaitsReady reports whether the client waits for READY after the schema frame before it sends
	// data.
	awaitsReady() bool
	// frameMetadata returns the app_metadata of the data frame numbered offset on its call (nil for
	// none).
	frameMetadata(offset int64) []byte
	// parse reads one PutResult of a call; ready says whether the call's READY came already. An
	// error marked fatal stops the load; another ends the call as a transient failure.
	parse(res *flight.PutResult, ready bool) (answer, error)
	// ackless reports whether a call's frames are acknowledged only when the call ends OK, given
	// whether the server sent cumulative acks on it. Such calls are bounded, and an answerCount
	// (if any came) must match the rows the call sent.
	ackless(acksSeen bool) bool
}

// answerKind says what a PutResult meant.
type answerKind int

const (
	answerNone  answerKind = iota // nothing to act on
	answerReady                   // READY: the call's setup succeeded
	answerAck                     // a cumulative acknowledgement (zerobus.Ack), possibly asking to rotate
	answerCount                   // the rows an ackless call ingested (Flight SQL DoPutUpdateResult)
)

// answer is one parsed PutResult.
type answer struct {
	kind  answerKind
	ack   zerobus.Ack // answerAck
	count int64       // answerCount; -1 means unknown
}

// protocolFor returns the protocol of a dialect, which ParseDialect has accepted.
func protocolFor(d Dialect, createTable bool) protocol {
	switch d {
	case Flight:
		return flightProtocol{}
	case FlightSQL:
		return flightSQLProtocol{createTable: createTable}
	}
	return zerobusProtocol{}
}

// zerobusProtocol is the Databricks Zerobus Ingest endpoint's protocol (reference sections 1 and 2):
// the table in a header, no descriptor, READY, offset_id metadata, cumulative ack JSON.
type zerobusProtocol struct{}

func (zerobusProtocol) schemaFrame(_ tableschema.TableName, schemaMsg []byte) (*flight.FlightData, error) {
	return &flight.FlightData{DataHeader: schemaMsg}, nil
}

func (zerobusProtocol) header(md metadata.MD, table tableschema.TableName) {
	md.Set(zerobus.HeaderTableName, table.String())
}

func (zerobusProtocol) awaitsReady() bool { return true }

func (zerobusProtocol) frameMetadata(offset int64) []byte { return zerobus.FrameMetadata(offset) }

func (zerobusProtocol) parse(res *flight.PutResult, ready bool) (answer, error) {
	ack, err := zerobus.ParseAck(res.GetAppMetadata())
	if err != nil {
		return answer{}, &fatal{err}
	}
	switch {
	case ready:
		return answer{kind: answerAck, ack: ack}, nil // a repeated READY acknowledges nothing
	case ack.IsReady():
		return answer{kind: answerReady}, nil
	case ack.Offset == zerobus.ReadyOffset && ack.Records == 0:
		return answer{}, errors.New("the server asked to rotate before READY")
	}
	return answer{}, &fatal{fmt.Errorf("%w: the first answer %s is not READY", zerobus.ErrProtocol, ack.Marshal())}
}

func (zerobusProtocol) ackless(bool) bool { return false }

// flightProtocol is a plain Flight DoPut: a PATH descriptor [catalog, schema, table] on the schema
// frame, offset_id metadata on data frames, and Zerobus ack JSON if the server sends any (a READY is
// tolerated); a server that sends none acknowledges a call's frames when it ends OK.
type flightProtocol struct{}

func (flightProtocol) schemaFrame(table tableschema.TableName, schemaMsg []byte) (*flight.FlightData, error) {
	return &flight.FlightData{
		DataHeader:       schemaMsg,
		FlightDescriptor: &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: table.Parts()},
	}, nil
}

func (flightProtocol) header(metadata.MD, tableschema.TableName) {}

func (flightProtocol) awaitsReady() bool { return false }

func (flightProtocol) frameMetadata(offset int64) []byte { return zerobus.FrameMetadata(offset) }

func (flightProtocol) parse(res *flight.PutResult, _ bool) (answer, error) {
	ack, err := zerobus.ParseAck(res.GetAppMetadata())
	if err != nil || ack.IsReady() {
		return answer{}, nil // not an ack: this server acknowledges at the end of the call
	}
	return answer{kind: answerAck, ack: ack}, nil
}

func (flightProtocol) ackless(acksSeen bool) bool { return !acksSeen }

// flightSQLProtocol is Flight SQL bulk ingest: a CMD descriptor holding a CommandStatementIngest that
// appends to the table (creating it first when createTable is set), no frame metadata, and one
// DoPutUpdateResult with the call's row count.
type flightSQLProtocol struct{ createTable bool }

// ingestCommand is the descriptor of a Flight SQL ingest into table.
func ingestCommand(table tableschema.TableName, createTable bool, txn ...[]byte) (*flight.FlightDescriptor, error) {
	notExist := pb.CommandStatementIngest_TableDefinitionOptions_TABLE_NOT_EXIST_OPTION_FAIL
	if createTable {
		notExist = pb.CommandStatementIngest_TableDefinitionOptions_TABLE_NOT_EXIST_OPTION_CREATE
	}
	cmd := &pb.CommandStatementIngest{
		TableDefinitionOptions: &pb.CommandStatementIngest_TableDefinitionOptions{
			IfNotExist: notExist,
			IfExists:   pb.CommandStatementIngest_TableDefinitionOptions_TABLE_EXISTS_OPTION_APPEND,
		},
		Table:   table.Table,
		Schema:  &table.Schema,
		Catalog: &table.Catalog,
	}
	if len(txn) > 0 {
		cmd.TransactionId = txn[0]
	}
	var a anypb.Any
	if err := a.MarshalFrom(cmd); err != nil {
		return nil, fmt.Errorf("flightclient: CommandStatementIngest: %w", err)
	}
	b, err := proto.Marshal(&a)
	if err != nil {
		return nil, fmt.Errorf("flightclient: CommandStatementIngest: %w", err)
	}
	return &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: b}, nil
}

func (p flightSQLProtocol) schemaFrame(table tableschema.TableName, schemaMsg []byte) (*flight.FlightData, error) {
	desc, err := ingestCommand(table, p.createTable)
	if err != nil {
		return nil, err
	}
	return &flight.FlightData{DataHeader: schemaMsg, FlightDescriptor: desc}, nil
}

func (flightSQLProtocol) header(metadata.MD, tableschema.TableName) {}

func (flightSQLProtocol) awaitsReady() bool { return false }

func (flightSQLProtocol) frameMetadata(int64) []byte { return nil }

func (flightSQLProtocol) parse(res *flight.PutResult, _ bool) (answer, error) {
	meta := res.GetAppMetadata()
	if len(meta) == 0 {
		return answer{}, nil
	}
	var r pb.DoPutUpdateResult
	if err := proto.Unmarshal(meta, &r); err != nil {
		return answer{}, &fatal{fmt.Errorf("%w: a PutResult's app_metadata is not a DoPutUpdateResult: %w", zerobus.ErrProtocol, err)}
	}
	return answer{kind: answerCount, count: r.GetRecordCount()}, nil
}

func (flightSQLProtocol) ackless(bool) bool { return true }
