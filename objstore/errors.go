package objstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	"gocloud.dev/gcerrors"
)

// Errors to test for with errors.Is; every error of this package about an object is an *Error
// whose Kind is one of them, or nil when the failure has no class of its own.
var (
	// ErrNotFound: the object (key) does not exist.
	ErrNotFound = errors.New("no such key")
	// ErrNoSuchBucket: the bucket (Azure container) does not exist.
	ErrNoSuchBucket = errors.New("no such bucket")
	// ErrAccessDenied: the credentials may not do this.
	ErrAccessDenied = errors.New("access denied")
	// ErrChanged: the object's ETag (or generation) is not the one it had when it was listed; it
	// was rewritten, and reading on would mix two versions.
	ErrChanged = errors.New("object changed since it was listed")
	// ErrPrecondition: a conditional write lost: Create found the object already there, or Update
	// found another version than the one it was given.
	ErrPrecondition = errors.New("precondition failed")
	// ErrTruncated: the store returned fewer bytes than the object's listed size says it holds.
	ErrTruncated = errors.New("object shorter than its listed size")
	// ErrNoCredentials: the SDK's credential chain gave no credentials to sign the request with. Its
	// text says where the AWS SDK (the only one it is told apart for) looks.
	ErrNoCredentials = errors.New("no usable credentials (the AWS SDK looks in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, " +
		"AWS_PROFILE (~/.aws/config and credentials), a web identity (AWS_WEB_IDENTITY_TOKEN_FILE) and the instance's role; " +
		"a public bucket takes ?anonymous=true on the URL)")
)

// awsNoCredentials is how aws-sdk-go-v2 begins the error of a request it could not sign because its
// credential chain failed (the SDK has no error type for it). What follows says why.
const awsNoCredentials = "get identity: get credentials: "

// Error is a failed operation on an object or bucket. It names the URL (without its query), the
// operation and the provider's error code where it gave one (AccessDenied, NoSuchBucket,
// PreconditionFailed). Its text never includes a credential.
type Error struct {
	URL  string // scheme://bucket/key
	Op   string // "list", "stat", "read", "write", "open bucket"
	Code string // the provider's code, "" when it gave none
	Kind error  // ErrNotFound, ErrNoSuchBucket, ErrAccessDenied, ErrNoCredentials, ErrChanged, ErrPrecondition, ErrTruncated or nil
	Err  error  // the SDK's error

	region string // the bucket's region, when S3 said the request went to another one
}

// Error renders "URL: op: Code: kind", or the SDK's message with any URL query removed when the
// failure has no class.
func (e *Error) Error() string {
	s := e.URL + ": " + e.Op + ": "
	if e.Code != "" {
		s += e.Code + ": "
	}
	if e.Kind == ErrNoCredentials && e.Err != nil { //nolint:errorlint // sentinel identity
		// The SDK's reason follows (an expired SSO session, a role it may not assume...), without its call chain.
		_, why, _ := strings.Cut(e.Err.Error(), awsNoCredentials)
		return s + e.Kind.Error() + ": " + sanitize(why)
	}
	if e.Kind != nil {
		return s + e.Kind.Error()
	}
	if e.Err != nil {
		return s + sanitize(e.Err.Error())
	}
	return s + "failed"
}

// Is reports whether target is the error's Kind.
func (e *Error) Is(target error) bool { return e.Kind != nil && target == e.Kind } //nolint:errorlint // sentinel identity

// Unwrap returns the SDK's error.
func (e *Error) Unwrap() error { return e.Err }

var queryRE = regexp.MustCompile(`\?[^\s"']*`)

// sanitize removes URL queries (where a SAS token or a presigned signature would be) from an SDK
// error message.
func sanitize(s string) string { return queryRE.ReplaceAllString(s, "?…") }

// classify wraps err, from op on loc, in an *Error with its kind and the provider's code. A context
// error is returned as it is.
func classify(loc Location, op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var oe *Error
	if errors.As(err, &oe) {
		return err
	}
	e := &Error{URL: loc.String(), Op: op, Err: err}
	var hre *awshttp.ResponseError
	if errors.As(err, &hre) && hre.HTTPStatusCode() == http.StatusMovedPermanently && hre.Response != nil {
		// S3 answers a request sent to another region than its bucket's with 301 (PermanentRedirect)
		// and names the bucket's region in a header
		if region := hre.Response.Header.Get("X-Amz-Bucket-Region"); regionName.MatchString(region) {
			e.Code, e.region = "PermanentRedirect", region
			e.Err = fmt.Errorf("the bucket is in region %s, not the one the request went to: set AWS_REGION=%s, or put region=%s in the URL's query", region, region, region)
			return e
		}
	}
	var ae smithy.APIError
	var re *azcore.ResponseError
	switch {
	case errors.As(err, &ae):
		e.Code = ae.ErrorCode()
	case errors.As(err, &re):
		e.Code = re.ErrorCode // Azure's x-ms-error-code, HEAD requests included
	}
	if e.Code == "" && strings.Contains(err.Error(), awsNoCredentials) {
		e.Kind = ErrNoCredentials
		return e
	}
	var ne *net.OpError
	if e.Code == "" && errors.As(err, &ne) {
		ue := &unreachableError{op: ne, err: err}
		var ma *retry.MaxAttemptsError
		if errors.As(err, &ma) {
			ue.attempts = ma.Attempt
		}
		e.Err = ue
		return e
	}
	switch e.Code {
	case "SignatureDoesNotMatch", "InvalidAccessKeyId", "AccessDenied", "AllAccessDisabled", // S3
		"AuthenticationFailed", "AuthorizationFailure", "AuthorizationPermissionMismatch", "InsufficientAccountPermissions": // Azure
		e.Kind = ErrAccessDenied
		return e
	case "NoSuchBucket", "ContainerNotFound":
		e.Kind = ErrNoSuchBucket
		return e
	case "NoSuchKey", "BlobNotFound":
		e.Kind = ErrNotFound
		return e
	}
	switch gcerrors.Code(err) {
	case gcerrors.NotFound:
		e.Kind = ErrNotFound
		if e.Code == "" {
			e.Code = "NotFound"
		}
	case gcerrors.PermissionDenied:
		e.Kind = ErrAccessDenied
		if e.Code == "" || e.Code == "Forbidden" { // a HEAD's 403 has no body to say more
			e.Code = "AccessDenied"
		}
	case gcerrors.FailedPrecondition:
		e.Kind = ErrPrecondition
		if e.Code == "" {
			e.Code = "PreconditionFailed"
		}
	case gcerrors.Canceled:
		return err
	}
	return e
}

// unreachableError is a request that got no answer: the connection to the store failed (refused,
// reset, no route, a name that does not resolve). It says so in a line, instead of the SDK's chain
// of wrappers (an S3 error with "StatusCode: 0, RequestID: , HostID: , request send failed"), and
// unwraps to that chain.
type unreachableError struct {
	op       *net.OpError
	attempts int // the SDK's attempts when it says how many, else 0
	err      error
}

func (e *unreachableError) Error() string {
	s := "cannot reach the store"
	if e.attempts > 0 {
		s += fmt.Sprintf(" (%d attempts)", e.attempts)
	}
	return s + ": " + e.op.Error()
}

func (e *unreachableError) Unwrap() error { return e.err }

func fmtRange(off, n int64) string { return fmt.Sprintf("bytes %d-%d", off, off+n-1) }

// bodyError is a response body that broke off (the connection reset or closed early) after Got
// bytes. Reads fetch on from there (Store.retryBody); when they give up, it is the error.
type bodyError struct {
	URL, Op string
	Got     int64
	Err     error
}

func (e *bodyError) Error() string {
	return fmt.Sprintf("%s: %s: the response broke off after %d bytes: %v", e.URL, e.Op, e.Got, e.Err)
}

func (e *bodyError) Unwrap() error { return e.Err }
