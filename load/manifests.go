package load

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/loaderproject/loader/manifest"
	remotemanifest "github.com/loaderproject/loader/manifest/remote"
	"github.com/loaderproject/loader/objstore"
)

// openManifest opens the load's manifest: in a local directory, or, when the manifest directory is
// an object-store URL (s3://, gs://, azblob://), in that bucket (package manifest/remote). The
// returned close releases it either way.
func openManifest(ctx context.Context, cfg *Config, target, dir, key string) (*manifest.Manifest, func() error, error) {
	label := manifest.WithLabel(target, cfg.Table.String())
	if !objstore.IsURL(dir) {
		m, err := manifest.Open(manifest.Path(dir, key, cfg.Table.String()), label)
		if err != nil {
			return nil, nil, err
		}
		return m, m.Close, nil
	}
	loc, err := objstore.Parse(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("manifest directory: %w", err)
	}
	st, done := cfg.Objects, func() error { return nil }
	if st == nil {
		st = objstore.New()
		done = st.Close
	}
	name := filepath.Base(manifest.Path("", key, cfg.Table.String()))
	rm, err := remotemanifest.Open(ctx, st, loc, name, remotemanifest.Options{
		Heartbeat:  cfg.ManifestLockTimeout / 3,
		StaleAfter: cfg.ManifestLockTimeout,
		Logger:     cfg.Logger,
		Manifest:   []manifest.Option{label},
	})
	if err != nil {
		done()
		return nil, nil, err
	}
	cfg.Logger.Debug("manifest in object storage", "url", rm.Location())
	return rm.Manifest, func() error {
		err := rm.Close()
		if derr := done(); err == nil {
			err = derr
		}
		return err
	}, nil
}
