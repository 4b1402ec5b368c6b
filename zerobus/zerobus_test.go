package zerobus_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loaderproject/loader/tableschema"
	"github.com/loaderproject/loader/zerobus"
)

func TestFrameMetadata(t *testing.T) {
	for _, n := range []int64{0, 1, 42, 1 << 40} {
		got, err := zerobus.ParseFrameMetadata(zerobus.FrameMetadata(n))
		if err != nil || got != n {
			t.Errorf("ParseFrameMetadata(FrameMetadata(%d)) = %d, %v; want %d", n, got, err, n)
		}
	}
	if string(zerobus.FrameMetadata(7)) != `{"offset_id":7}` {
		t.Errorf("FrameMetadata(7) = %s", zerobus.FrameMetadata(7))
	}
	for _, bad := range []string{"", "{}", `{"offset_id":-1}`, `{"offset_id":1.5}`, `{"offset_id":"3"}`, "[1]", "{"} {
		if _, err := zerobus.ParseFrameMetadata([]byte(bad)); !errors.Is(err, zerobus.ErrProtocol) {
			t.Errorf("ParseFrameMetadata(%q) = %v; want ErrProtocol", bad, err)
		}
	}
	if n, err := zerobus.ParseFrameMetadata([]byte(`{"offset_id": 3, "extra": true}`)); err != nil || n != 3 {
		t.Errorf("ParseFrameMetadata with extra key = %d, %v; want 3", n, err)
	}
}

func TestAck(t *testing.T) {
	if got := string(zerobus.Ready().Marshal()); got != `{"ack_up_to_offset":-1,"ack_up_to_records":0}` {
		t.Errorf("Ready().Marshal() = %s", got)
	}
	ms := uint64(1500)
	in := zerobus.Ack{Offset: 9, Records: 12345, CloseStreamAfterMs: &ms}
	out, err := zerobus.ParseAck(in.Marshal())
	if err != nil || out.Offset != 9 || out.Records != 12345 || out.CloseStreamAfterMs == nil || *out.CloseStreamAfterMs != 1500 {
		t.Errorf("ParseAck(%s) = %+v, %v", in.Marshal(), out, err)
	}
	if out.IsReady() {
		t.Errorf("%+v.IsReady() = true", out)
	}
	tests := []struct {
		in    string
		ok    bool
		ready bool
	}{
		{`{"ack_up_to_offset":-1,"ack_up_to_records":0}`, true, true},
		{`{"ack_up_to_offset":-1,"ack_up_to_records":0,"close_stream_duration_ms":null}`, true, true},
		{`{"ack_up_to_offset":3,"ack_up_to_records":10,"future_field":"x"}`, true, false},
		{`{"ack_up_to_offset":-1,"ack_up_to_records":0,"close_stream_duration_ms":5}`, true, false},
		{`{"ack_up_to_records":10}`, false, false},
		{`{"ack_up_to_offset":3}`, false, false},
		{`{"ack_up_to_offset":-2,"ack_up_to_records":0}`, false, false},
		{`{"ack_up_to_offset":1,"ack_up_to_records":-5}`, false, false},
		{`{"ack_up_to_offset":1,"ack_up_to_records":"5"}`, false, false},
		{`{"ack_up_to_offset":1,"ack_up_to_records":5,"close_stream_duration_ms":-1}`, false, false},
		{`not json`, false, false},
	}
	for _, tt := range tests {
		a, err := zerobus.ParseAck([]byte(tt.in))
		if (err == nil) != tt.ok {
			t.Errorf("ParseAck(%s) error = %v; want ok=%t", tt.in, err, tt.ok)
		}
		if err == nil && a.IsReady() != tt.ready {
			t.Errorf("ParseAck(%s).IsReady() = %t; want %t", tt.in, a.IsReady(), tt.ready)
		}
	}
}

func mustColumns(t *testing.T, cols string) *tableschema.Schema {
	t.Helper()
	s, err := tableschema.ParseColumns(cols)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestValidateSchemaAcceptsCanonical(t *testing.T) {
	table := mustColumns(t, "id BIGINT NOT NULL, name STRING, price DECIMAL(10,2), tags ARRAY<STRING>, "+
		"m MAP<STRING, INT>, st STRUCT<a: INT NOT NULL, b: TIMESTAMP>, ts TIMESTAMP, ntz TIMESTAMP_NTZ")
	if err := zerobus.ValidateSchema(table, table.Arrow()); err != nil {
		t.Fatalf("ValidateSchema(canonical) = %v", err)
	}
	// Nullable columns may be left out.
	sub := arrow.NewSchema([]arrow.Field{table.Fields[0].Arrow(), table.Fields[6].Arrow()}, nil)
	if err := zerobus.ValidateSchema(table, sub); err != nil {
		t.Errorf("ValidateSchema(subset) = %v", err)
	}
}

func TestValidateSchemaRejects(t *testing.T) {
	table := mustColumns(t, "id BIGINT NOT NULL, name STRING, ts TIMESTAMP, tags ARRAY<STRING>, st STRUCT<a: INT NOT NULL>")
	f := func(name string, dt arrow.DataType, nullable bool) arrow.Field {
		return arrow.Field{Name: name, Type: dt, Nullable: nullable}
	}
	id := table.Fields[0].Arrow()
	tests := []struct {
		name   string
		fields []arrow.Field
		causes []zerobus.Cause
		words  []string
	}{
		{"extra field", []arrow.Field{id, f("nope", arrow.BinaryTypes.LargeString, true)},
			[]zerobus.Cause{zerobus.CauseFieldNotInTable}, []string{`"nope"`}},
		{"case differs", []arrow.Field{id, f("NAME", arrow.BinaryTypes.LargeString, true)},
			[]zerobus.Cause{zerobus.CauseFieldNotInTable}, []string{`"NAME"`, `the table has "name"`}},
		{"missing required", []arrow.Field{table.Fields[1].Arrow()},
			[]zerobus.Cause{zerobus.CauseMissingRequiredColumn}, []string{`"id"`, "BIGINT NOT NULL"}},
		{"out of order", []arrow.Field{id, table.Fields[2].Arrow(), table.Fields[1].Arrow()},
			[]zerobus.Cause{zerobus.CauseFieldOutOfOrder}, []string{`"name"`}},
		{"utf8 not large", []arrow.Field{id, f("name", arrow.BinaryTypes.String, true)},
			[]zerobus.Cause{zerobus.CauseTypeIncompatible}, []string{`"name"`, "utf8"}},
		{"timestamp unit", []arrow.Field{id, f("ts", arrow.FixedWidthTypes.Timestamp_ns, true)},
			[]zerobus.Cause{zerobus.CauseTypeIncompatible}, []string{`"ts"`}},
		{"nullability", []arrow.Field{f("id", arrow.PrimitiveTypes.Int64, true)},
			[]zerobus.Cause{zerobus.CauseTypeIncompatible}, []string{`"id"`, "nullable=true"}},
		{"list element name", []arrow.Field{id, f("tags", arrow.ListOfField(arrow.Field{Name: "element", Type: arrow.BinaryTypes.LargeString, Nullable: true}), true)},
			[]zerobus.Cause{zerobus.CauseTypeIncompatible}, []string{`"tags"`, `"element"`}},
		{"struct child nullability", []arrow.Field{id, f("st", arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true}), true)},
			[]zerobus.Cause{zerobus.CauseTypeIncompatible}, []string{"st.a"}},
		{"too many and duplicated", []arrow.Field{id, id, table.Fields[1].Arrow(), table.Fields[2].Arrow(), table.Fields[3].Arrow(), table.Fields[4].Arrow()},
			[]zerobus.Cause{zerobus.CauseFieldCountMismatch}, []string{"appears more than once", "6 fields"}},
		{"everything at once", []arrow.Field{f("name", arrow.BinaryTypes.String, true), f("x", arrow.PrimitiveTypes.Int8, true)},
			[]zerobus.Cause{zerobus.CauseTypeIncompatible, zerobus.CauseFieldNotInTable, zerobus.CauseMissingRequiredColumn},
			[]string{`"name"`, `"x"`, `"id"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := zerobus.ValidateSchema(table, arrow.NewSchema(tt.fields, nil))
			if err == nil {
				t.Fatal("ValidateSchema = nil; want an error")
			}
			if fmt.Sprint(err.Causes) != fmt.Sprint(tt.causes) {
				t.Errorf("causes = %v; want %v", err.Causes, tt.causes)
			}
			for _, w := range tt.words {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message %q lacks %q", err.Error(), w)
				}
			}
			// The wire form round-trips through a gRPC status.
			st := status.Convert(err)
			if st.Code() != codes.InvalidArgument {
				t.Errorf("status code = %v; want InvalidArgument", st.Code())
			}
			info := zerobus.ErrorInfoOf(st)
			if info == nil || info.Reason != zerobus.ReasonSchemaValidationFailed || info.Domain != zerobus.ErrorDomain ||
				info.Metadata["error_code"] != "8001" {
				t.Fatalf("ErrorInfo = %v", info)
			}
			back, ok := zerobus.AsSchemaError(st.Err())
			if !ok || fmt.Sprint(back.Causes) != fmt.Sprint(tt.causes) || back.Error() != err.Error() {
				t.Errorf("AsSchemaError(wire) = %v, %t; want %v", back, ok, err)
			}
			if zerobus.Retryable(st.Err()) {
				t.Error("Retryable(schema error) = true")
			}
		})
	}
}

func TestNonIncrementalOffsetError(t *testing.T) {
	err := zerobus.NonIncrementalOffsetError(3, 5)
	st := status.Convert(err)
	if st.Code() != codes.InvalidArgument || st.Message() != "Non-incremental offset: expected 3, actual 5" {
		t.Errorf("NonIncrementalOffsetError(3, 5) = %v", err)
	}
	if info := zerobus.ErrorInfoOf(st); info == nil || info.Metadata["error_code"] != "4002" {
		t.Errorf("ErrorInfo = %v; want error_code 4002", info)
	}
}

func TestRetryable(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{status.Error(codes.Unavailable, "x"), true},
		{status.Error(codes.Internal, "x"), true},
		{status.Error(codes.DeadlineExceeded, "x"), true},
		{status.Error(codes.ResourceExhausted, "x"), true},
		{fmt.Errorf("wrapped: %w", status.Error(codes.Unavailable, "x")), true},
		{errors.New("connection reset"), true},
		{status.Error(codes.InvalidArgument, "x"), false},
		{status.Error(codes.Unauthenticated, "x"), false},
		{status.Error(codes.PermissionDenied, "x"), false},
		{status.Error(codes.NotFound, "x"), false},
		{status.Error(codes.Unimplemented, "x"), false},
		{status.Error(codes.OutOfRange, "x"), false},
		{nil, false},
	}
	for _, tt := range tests {
		if got := zerobus.Retryable(tt.err); got != tt.want {
			t.Errorf("Retryable(%v) = %t; want %t", tt.err, got, tt.want)
		}
	}
}
