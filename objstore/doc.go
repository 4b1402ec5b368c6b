// Package objstore reads and writes objects in S3, Google Cloud Storage and Azure Blob Storage
// through gocloud.dev/blob, for sources and manifests addressed by URL (s3://bucket/key,
// gs://bucket/key, azblob://container/key).
//
// A Store owns the buckets a run opens (one per scheme and bucket, opened on first use and closed by
// Close) and counts the requests it makes and the bytes it reads, for summaries and benchmarks.
//
// Credentials come from each SDK's standard chain (AWS_PROFILE, AWS_ACCESS_KEY_ID and friends, web
// identity and instance metadata; GOOGLE_APPLICATION_CREDENTIALS and the metadata server;
// AZURE_STORAGE_ACCOUNT with a key, a SAS or the default Azure credential). They never appear in
// an error or a log line: errors name the object's URL without its query, the operation and the
// provider's error code (S3's AccessDenied, NoSuchBucket; Azure's AuthenticationFailed,
// ContainerNotFound, BlobNotFound), and are classified for errors.Is by the sentinels ErrNotFound,
// ErrNoSuchBucket, ErrAccessDenied, ErrChanged and ErrPrecondition. A conditional read answered
// with 412 is checked once more (one HEAD), so an object deleted since listing is ErrNotFound on
// stores (Azure) that do not say 404 then.
//
// Tests: S3 against versitygw (make test); GCS against fake-gcs-server and Azure against Azurite
// (make test-emulators).
//
// S3-compatible stores (MinIO, Ceph, R2, versitygw) are reached through AWS_ENDPOINT_URL_S3 or
// AWS_ENDPOINT_URL, or the URL's ?endpoint=...&use_path_style=true; path-style addressing is the
// default when the endpoint's host is an IP address or localhost. Transient failures (5xx,
// throttling, resets) are retried with backoff by the SDK's own retryer, configured by Store
// options rather than rewritten here (S3 and GCS per client, Azure per call). The SDKs retry a request only until its response starts; a
// body that breaks off (a reset or early close in the middle of a download) is fetched on from
// where it stopped by the Reader and the Stream, with a GET conditional on the same ETag and the
// SDK's backoff (Store.Retries counts them). A response that stalls is given up after the stall
// timeout (WithStallTimeout, 60s): its body is then fetched on the same way; its headers are the
// SDK's to retry on S3 (the transport's ResponseHeaderTimeout), and are asked again by the Reader
// and the Stream on GCS and Azure, whose clients bring their own transports; a stalled stat, list
// or delete is tried again by Azure's SDK (a per-try timeout) and by the Store on GCS; a write that
// takes longer than the stall timeout plus a second per MiB fails (it may have landed: it is not
// sent again).
//
// Memory: the buffers of Prefetch and Stream come from the Store's pool and go back to it on
// Prefetched.Release and as a Stream is read or closed, so a long load reuses them.
//
// Reading: a Reader is an io.ReaderAt over one version of an object (its ETag, or GCS generation,
// pinned at listing time: every ranged GET is conditional on it, and a change fails with
// ErrChanged rather than mixing two versions). Prefetch fetches a set of byte ranges at once,
// merging adjacent ones and running the GETs in parallel, bounded; Stream reads sequentially with
// read-ahead.
//
// Writing: Create (If-None-Match: *) and Update (If-Match: etag) are the conditional writes a
// manifest store needs; a lost race fails with ErrPrecondition.
//
// Every method of a Store and a Reader may be called from several goroutines at once.
package objstore
