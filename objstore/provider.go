package objstore

import (
	"net/url"
	"strconv"
	"strings"

	"cloud.google.com/go/storage"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	azblobblob "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"gocloud.dev/blob"
)

// This file holds what gocloud.dev/blob leaves to each provider's own types (reached through As):
// the version tag of a listed object and the conditions on reads and writes.

func bucketURL(loc Location) *url.URL {
	return &url.URL{Scheme: loc.Scheme, Host: loc.Bucket, RawQuery: loc.Query.Encode()}
}

func cloneQuery(q url.Values) url.Values {
	out := url.Values{}
	for k, v := range q {
		out[k] = append([]string(nil), v...)
	}
	return out
}

// gcsGen is the ETag form of a GCS generation.
func gcsGen(g int64) string { return "g" + strconv.FormatInt(g, 10) }

func parseGen(etag string) (int64, bool) {
	if !strings.HasPrefix(etag, "g") {
		return 0, false
	}
	g, err := strconv.ParseInt(etag[1:], 10, 64)
	return g, err == nil
}

// listETag is a listed object's version tag.
func listETag(o *blob.ListObject) string {
	var so types.Object
	if o.As(&so) && so.ETag != nil {
		return *so.ETag
	}
	var ga storage.ObjectAttrs
	if o.As(&ga) && ga.Generation != 0 {
		return gcsGen(ga.Generation)
	}
	var ai container.BlobItem
	if o.As(&ai) && ai.Properties != nil && ai.Properties.ETag != nil {
		return string(*ai.Properties.ETag)
	}
	return ""
}

// attrsETag is an object's version tag from its attributes.
func attrsETag(a *blob.Attributes) string {
	var ga storage.ObjectAttrs
	if a.As(&ga) && ga.Generation != 0 {
		return gcsGen(ga.Generation)
	}
	return a.ETag
}

// ifMatchRead makes a read conditional on the object's version: a changed object fails the GET
// (412, ErrPrecondition, which the reader reports as ErrChanged).
func ifMatchRead(etag string, suffix int64) func(func(any) bool) error {
	return func(as func(any) bool) error {
		var in *s3.GetObjectInput
		if as(&in) {
			if etag != "" {
				in.IfMatch = aws.String(etag)
			}
			if suffix > 0 {
				in.Range = aws.String("bytes=-" + strconv.FormatInt(suffix, 10))
			}
			return nil
		}
		if etag == "" {
			return nil
		}
		var oh **storage.ObjectHandle
		if as(&oh) {
			if g, ok := parseGen(etag); ok {
				*oh = (*oh).If(storage.Conditions{GenerationMatch: g})
			}
			return nil
		}
		var ao *azblobblob.DownloadStreamOptions
		if as(&ao) {
			tag := azcore.ETag(etag)
			if ao.AccessConditions == nil {
				ao.AccessConditions = &azblobblob.AccessConditions{}
			}
			if ao.AccessConditions.ModifiedAccessConditions == nil {
				ao.AccessConditions.ModifiedAccessConditions = &azblobblob.ModifiedAccessConditions{}
			}
			ao.AccessConditions.ModifiedAccessConditions.IfMatch = &tag
		}
		return nil
	}
}

// ifMatchWrite makes a write conditional on the object's current version.
func ifMatchWrite(etag string) func(func(any) bool) error {
	return func(as func(any) bool) error {
		var in *transfermanager.UploadObjectInput
		if as(&in) {
			in.IfMatch = aws.String(etag)
			return nil
		}
		var oh **storage.ObjectHandle
		if as(&oh) {
			if g, ok := parseGen(etag); ok {
				*oh = (*oh).If(storage.Conditions{GenerationMatch: g})
			}
			return nil
		}
		var ao *azblob.UploadStreamOptions
		if as(&ao) {
			tag := azcore.ETag(etag)
			ao.AccessConditions = &azblob.AccessConditions{ModifiedAccessConditions: &azblobblob.ModifiedAccessConditions{IfMatch: &tag}}
		}
		return nil
	}
}

// readVersion is the version tag of the object a GET answered with, "" when the provider's reader
// does not say. Reads check it too, for stores that ignore a read's condition (emulators).
func readVersion(rr *blob.Reader) string {
	var so s3.GetObjectOutput
	if rr.As(&so) {
		return aws.ToString(so.ETag)
	}
	var gr *storage.Reader
	if rr.As(&gr) && gr != nil && gr.Attrs.Generation != 0 {
		return gcsGen(gr.Attrs.Generation)
	}
	return ""
}
