package objstore

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// The URL schemes a Store opens.
const (
	SchemeS3    = "s3"
	SchemeGCS   = "gs"
	SchemeAzure = "azblob"
)

// IsURL reports whether s is an object-store URL: it starts with s3://, gs:// or azblob://.
func IsURL(s string) bool {
	for _, p := range []string{SchemeS3 + "://", SchemeGCS + "://", SchemeAzure + "://"} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// Location is a parsed object-store URL.
type Location struct {
	Scheme string // s3, gs or azblob
	Bucket string // the bucket (an Azure container)
	Key    string // the object key or prefix, without a leading '/'; "" for the whole bucket
	// Query holds the URL's parameters (endpoint, region, use_path_style, ...), which configure
	// the bucket.
	Query url.Values
}

// Parse parses an object-store URL. Its key is taken as written: glob characters (*, ?, [, {) are
// kept, and no percent-decoding is applied beyond the URL's own.
func Parse(raw string) (Location, error) {
	if !IsURL(raw) {
		return Location{}, fmt.Errorf("%q is not an object-store URL (want s3://, gs:// or azblob://)", redact(raw))
	}
	scheme, rest, _ := strings.Cut(raw, "://")
	rest, rawQuery, _ := strings.Cut(rest, "?")
	bucket, key, _ := strings.Cut(rest, "/")
	if bucket == "" {
		return Location{}, fmt.Errorf("%s://: no bucket named", scheme)
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return Location{}, fmt.Errorf("%s://%s: bad query: %w", scheme, bucket, err)
	}
	return Location{Scheme: scheme, Bucket: bucket, Key: key, Query: q}, nil
}

// String is the URL without its query: scheme://bucket/key. It is what errors and logs name, so a
// token in the query (a SAS) never shows.
func (l Location) String() string { return l.Scheme + "://" + l.Bucket + "/" + l.Key }

// Child is the location of key in the same bucket, with the same parameters.
func (l Location) Child(key string) Location {
	l.Key = key
	return l
}

// bucketID names the bucket a Store caches: scheme and bucket.
func (l Location) bucketID() string { return l.Scheme + "://" + l.Bucket }

// redact drops the query of a URL-like string, which may carry a token.
func redact(s string) string {
	if i := strings.IndexByte(s, '?'); i >= 0 {
		return s[:i] + "?…"
	}
	return s
}

// pathStyleHost reports whether an endpoint's host calls for path-style addressing by default: an
// IP address or localhost, where virtual-hosted bucket names cannot resolve.
func pathStyleHost(endpoint string) bool {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return false
	}
	h := u.Hostname()
	return h == "localhost" || strings.HasSuffix(h, ".localhost") || net.ParseIP(h) != nil
}
