package main

import (
	"github.com/loaderproject/loader/objstore"
)

// objectStore returns the store that reads the object-store sources among sources (s3://, gs://,
// azblob://), and a function that closes it; nil when every source is local.
func objectStore(sources ...string) (*objstore.Store, func()) {
	for _, s := range sources {
		if objstore.IsURL(s) {
			st := objstore.New()
			return st, func() { _ = st.Close() }
		}
	}
	return nil, func() {}
}
