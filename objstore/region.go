package objstore

import (
	"context"
	"errors"
	"net/http"
	"regexp"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"gocloud.dev/blob"
)

// expectingRegion finds the bucket's region in the message of an AuthorizationHeaderMalformed
// error: S3 says "the region 'us-east-1' is wrong; expecting 'eu-west-3'", and S3-compatible stores
// say much the same with other quotes.
var expectingRegion = regexp.MustCompile(`expecting ['"]([a-z0-9-]+)['"]`)

// regionName is what a region a store names may look like (us-east-1, eu-west-3, auto), so that a
// header cannot take the requests anywhere else.
var regionName = regexp.MustCompile(`^[a-z0-9-]+$`)

// movedTo returns the region an S3 error names as its bucket's when the request may have been
// signed for (or sent to) another region: a redirect (301, 302 or 307) or a 400 carrying
// X-Amz-Bucket-Region, as S3 answers, or a 400 AuthorizationHeaderMalformed that says which region
// it expected, as S3-compatible stores with a region of their own answer. It returns "" for any
// other error.
func movedTo(err error) string {
	var e *Error
	if errors.As(err, &e) && e.region != "" {
		return e.region
	}
	var hre *awshttp.ResponseError
	if errors.As(err, &hre) && hre.Response != nil {
		switch hre.HTTPStatusCode() {
		case http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusBadRequest:
			if region := hre.Response.Header.Get("X-Amz-Bucket-Region"); regionName.MatchString(region) {
				return region
			}
		}
	}
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() == "AuthorizationHeaderMalformed" {
		if m := expectingRegion.FindStringSubmatch(ae.ErrorMessage()); m != nil {
			return m[1]
		}
	}
	return ""
}

// follow reopens loc's S3 bucket in the region err names as the bucket's (movedTo), for the rest
// of the Store's life, and returns the bucket to send the request to again: what the SDKs of other
// languages do (boto3's S3RegionRedirector), and the Go SDK does not. A bucket is followed once; a
// request that failed on b after another one moved it gets the moved bucket. It returns false
// when err names no region, the bucket is not an S3 one, or reopening fails (err stands).
func (s *Store) follow(ctx context.Context, loc Location, b *blob.Bucket, err error) (*blob.Bucket, bool) {
	if loc.Scheme != SchemeS3 || err == nil {
		return nil, false
	}
	region := movedTo(err)
	if region == "" && bareBadRequest(err) {
		// A HEAD has no body to say why: S3 puts the region in a header (movedTo), some
		// S3-compatible stores (versitygw) say nothing. A listing of the key, which has a body,
		// says what is wrong.
		s.requests.Add(1)
		_, _, lerr := b.ListPage(ctx, blob.FirstPageToken, 1, &blob.ListOptions{Prefix: loc.Key})
		region = movedTo(lerr)
	}
	if region == "" {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.buckets[loc.bucketID()]
	if e == nil || e.b == nil {
		return nil, false
	}
	if e.b != b {
		return e.b, true // moved already, by a request that failed before this one
	}
	var c *s3.Client
	if b.As(&c) && c.Options().Region == region {
		return nil, false // there already, and still refused: not a question of region
	}
	moved := loc
	moved.Query = cloneQuery(e.query)
	moved.Query.Set("region", region)
	nb, oerr := s.openS3(ctx, moved)
	if oerr != nil {
		return nil, false
	}
	s.opts.logger.Info("the bucket is in another region than the one configured: following it",
		"bucket", loc.bucketID(), "region", region)
	e.old = append(e.old, e.b)
	e.b = nb
	return nb, true
}

// onBucket runs call on loc's bucket, and once more on the bucket moved to its region when call's
// error says the bucket lives in another one (follow).
func (s *Store) onBucket(ctx context.Context, loc Location, call func(*blob.Bucket) error) error {
	b, err := s.bucket(ctx, loc)
	if err != nil {
		return err
	}
	err = call(b)
	if nb, ok := s.follow(ctx, loc, b, err); ok {
		err = call(nb)
	}
	return err
}

// bareBadRequest tells a 400 that says nothing more (the answer to a HEAD) from other errors.
func bareBadRequest(err error) bool {
	var hre *awshttp.ResponseError
	var ae smithy.APIError
	return errors.As(err, &hre) && hre.HTTPStatusCode() == http.StatusBadRequest &&
		(!errors.As(err, &ae) || ae.ErrorCode() == "BadRequest")
}
