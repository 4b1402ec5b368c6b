package main

import (
	"slices"

	"github.com/loaderproject/loader/load"
	"github.com/loaderproject/loader/objstore"
)

// objectStore returns the store that reads the object-store sources among sources (s3://, gs://,
// azblob://), and a function that closes it; nil when every source is local.
func objectStore(opts []objstore.Option, sources ...string) (*objstore.Store, func()) {
	if !slices.ContainsFunc(sources, objstore.IsURL) {
		return nil, func() {}
	}
	st := objstore.New(opts...)
	return st, func() { _ = st.Close() }
}

// withObjects sets cfg.Objects to a store for cfg's object-store sources and manifest directory, once
// the flags have set them all (a shard plan's sources among them); the function it returns closes it.
func withObjects(cfg *load.Config, input inputFlags) func() {
	var closeObjects func()
	opts := append(input.objectOptions(), objstore.WithLogger(cfg.Logger))
	cfg.Objects, closeObjects = objectStore(opts, append([]string{cfg.ManifestDir}, cfg.Sources...)...)
	return closeObjects
}
