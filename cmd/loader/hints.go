package main

import (
	"errors"

	"github.com/loaderproject/loader/flightclient"
	"github.com/loaderproject/loader/load"
	"github.com/loaderproject/loader/manifest"
	"github.com/loaderproject/loader/readers"
)

// hint says which command or flag gets past an error, for the errors the CLI knows a way past.
// Libraries state facts; the CLI names its own flags.
func hint(err error) string {
	var (
		notFound *load.TableNotFoundError
		lossy    *load.LossyDescriptionError
		page     *readers.PageTooLargeError
		shards   *load.ShardCountError
	)
	switch {
	case err == nil:
		return ""
	case errors.As(err, &page):
		return "raise the page limit with --max-page-bytes (decoding such a page takes about twice its size in memory)"
	case errors.As(err, &shards):
		return "keep --shard-count as it was, or pass --force to load every shard afresh under the new count"
	case errors.Is(err, manifest.ErrLocked):
		return "another loader is running this load (or this shard) now; wait for it, or stop it, then run again"
	case errors.As(err, &lossy):
		return "give the table's real columns with --table-schema"
	case errors.As(err, &notFound):
		return "create it first (`loader table create` for the embedded sink) or pass --create-table"
	case errors.Is(err, load.ErrConfig) && errors.Is(err, flightclient.ErrUnsupported):
		return "--create-table works with the embedded sink and Flight SQL targets; create the table on the target first"
	}
	return databricksHint(err)
}

// hinted is an error with the hint that gets past it, on a line of its own.
type hinted struct {
	err  error
	hint string
}

func (h hinted) Error() string { return h.err.Error() + "\n  hint: " + h.hint }
func (h hinted) Unwrap() error { return h.err }

// withHint adds its hint to err, if it has one.
func withHint(err error) error {
	if h := hint(err); h != "" {
		return hinted{err: err, hint: h}
	}
	return err
}
