package zerobus

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrorDomain is the ErrorInfo domain of Zerobus errors.
const ErrorDomain = "zerobus.databricks.com"

// ErrorInfo reasons and numeric error codes. SCHEMA_VALIDATION_FAILED/8001 and 4002 come from the
// reference; the NON_INCREMENTAL_OFFSET reason name is our choice, as the reference does not give one.
const (
	ReasonSchemaValidationFailed = "SCHEMA_VALIDATION_FAILED"
	ReasonNonIncrementalOffset   = "NON_INCREMENTAL_OFFSET"

	ErrorCodeSchemaValidation     = "8001"
	ErrorCodeNonIncrementalOffset = "4002"
)

// Cause is one token of a schema error's "causes" metadata.
type Cause string

// The schema error causes, in the order they are reported.
const (
	CauseFieldNotInTable       Cause = "FIELD_NOT_IN_TABLE"
	CauseMissingRequiredColumn Cause = "MISSING_REQUIRED_COLUMN"
	CauseFieldOutOfOrder       Cause = "FIELD_OUT_OF_ORDER"
	CauseTypeIncompatible      Cause = "TYPE_INCOMPATIBLE"
	CauseFieldCountMismatch    Cause = "FIELD_COUNT_MISMATCH"
)

// SchemaError is a failed schema validation. On the wire it is InvalidArgument with an ErrorInfo detail
// (reason SCHEMA_VALIDATION_FAILED, domain zerobus.databricks.com, metadata error_code and causes).
// Problems holds one sentence per offending field; the message joins them all.
type SchemaError struct {
	Causes    []Cause
	Problems  []string
	ErrorCode string
}

// Error returns "Arrow Flight schema validation failed: " followed by every problem.
func (e *SchemaError) Error() string {
	return "Arrow Flight schema validation failed: " + strings.Join(e.Problems, "; ")
}

// Has reports whether c is among the error's causes.
func (e *SchemaError) Has(c Cause) bool {
	for _, x := range e.Causes {
		if x == c {
			return true
		}
	}
	return false
}

func (e *SchemaError) add(c Cause, format string, args ...any) {
	if !e.Has(c) {
		e.Causes = append(e.Causes, c)
	}
	e.Problems = append(e.Problems, fmt.Sprintf(format, args...))
}

// GRPCStatus gives the wire form, so status.Convert and the gRPC server use it directly.
func (e *SchemaError) GRPCStatus() *status.Status {
	causes := make([]string, len(e.Causes))
	for i, c := range e.Causes {
		causes[i] = string(c)
	}
	code := e.ErrorCode
	if code == "" {
		code = ErrorCodeSchemaValidation
	}
	return withInfo(codes.InvalidArgument, e.Error(), ReasonSchemaValidationFailed, map[string]string{
		"error_code": code,
		"causes":     strings.Join(causes, ","),
	})
}

// AsSchemaError recovers a SchemaError from a gRPC error received by a client. It returns false when err
// is not InvalidArgument with a SCHEMA_VALIDATION_FAILED ErrorInfo.
func AsSchemaError(err error) (*SchemaError, bool) {
	var se *SchemaError
	if errors.As(err, &se) {
		return se, true
	}
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.InvalidArgument {
		return nil, false
	}
	info := ErrorInfoOf(st)
	if info == nil || info.GetReason() != ReasonSchemaValidationFailed {
		return nil, false
	}
	out := &SchemaError{ErrorCode: info.GetMetadata()["error_code"]}
	for _, c := range strings.Split(info.GetMetadata()["causes"], ",") {
		if c = strings.TrimSpace(c); c != "" {
			out.Causes = append(out.Causes, Cause(c))
		}
	}
	msg := strings.TrimPrefix(st.Message(), "Arrow Flight schema validation failed: ")
	out.Problems = strings.Split(msg, "; ")
	return out, true
}

// ErrorInfoOf returns the first ErrorInfo detail of a status, or nil.
func ErrorInfoOf(st *status.Status) *errdetails.ErrorInfo {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info
		}
	}
	return nil
}

// NonIncrementalOffsetError is the server's answer to a data frame whose offset_id is not the next one:
// InvalidArgument "Non-incremental offset: expected E, actual A", as the SDK's mock server words it,
// with ErrorInfo error_code 4002.
func NonIncrementalOffsetError(expected, actual int64) error {
	msg := fmt.Sprintf("Non-incremental offset: expected %d, actual %d", expected, actual)
	return withInfo(codes.InvalidArgument, msg, ReasonNonIncrementalOffset, map[string]string{
		"error_code": ErrorCodeNonIncrementalOffset,
	}).Err()
}

func withInfo(code codes.Code, msg, reason string, md map[string]string) *status.Status {
	st := status.New(code, msg)
	if with, err := st.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain, Metadata: md}); err == nil {
		return with
	}
	return st
}

// Retryable reports whether a failed DoPut may succeed on a fresh one, by the reference's section 6:
// InvalidArgument, Unauthenticated, PermissionDenied, OutOfRange, Unimplemented and NotFound are fatal,
// as is a cancelled context or a schema error; every other status (Unavailable, Internal,
// DeadlineExceeded, a server EOF, ...) is transient. Errors that are not gRPC statuses are transient,
// as a broken connection surfaces that way.
func Retryable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.Canceled) {
		return false
	}
	var se *SchemaError
	if errors.As(err, &se) {
		return false
	}
	st, ok := status.FromError(err)
	if !ok {
		return true
	}
	switch st.Code() {
	case codes.InvalidArgument, codes.Unauthenticated, codes.PermissionDenied, codes.OutOfRange,
		codes.Unimplemented, codes.NotFound, codes.Canceled:
		return false
	}
	return true
}

// ErrorCodeTableNotGranted is the service's error code for a token whose authorization_details do
// not grant the table of the call (missing MODIFY and SELECT directly on the table).
const ErrorCodeTableNotGranted = "4024"

// ReasonTableNotGranted is the ErrorInfo reason the embedded sink gives with error 4024 (our name).
const ReasonTableNotGranted = "TABLE_NOT_GRANTED"

// TableNotGrantedError is PermissionDenied with error code 4024: msg says which table was asked and
// what the token grants.
func TableNotGrantedError(msg string) error {
	return withInfo(codes.PermissionDenied, msg, ReasonTableNotGranted, map[string]string{"error_code": ErrorCodeTableNotGranted}).Err()
}

// IsTableNotGranted reports whether err is error 4024 (PermissionDenied with that error_code) or a
// PermissionDenied without details, which the service uses for missing grants.
func IsTableNotGranted(err error) bool {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.PermissionDenied {
		return false
	}
	info := ErrorInfoOf(st)
	return info == nil || info.GetMetadata()["error_code"] == ErrorCodeTableNotGranted
}
