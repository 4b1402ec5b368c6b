package load

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

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
	st, done, loc, err := objectsFor(cfg, dir)
	if err != nil {
		return nil, nil, err
	}
	name := filepath.Base(manifest.Path("", key, cfg.Table.String()))
	rm, err := remotemanifest.Open(ctx, st, loc, name, remotemanifest.Options{
		Heartbeat:  cfg.ManifestLockTimeout / 3,
		StaleAfter: cfg.ManifestLockTimeout,
		Logger:     cfg.Logger,
		Manifest:   []manifest.Option{label},
	})
	if err != nil {
		_ = done()
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

// otherShardCountObjects is otherShardCount for a manifest directory in object storage.
func otherShardCountObjects(ctx context.Context, cfg *Config, base, name string) (int, error) {
	st, done, loc, err := objectsFor(cfg, base)
	if err != nil {
		return -1, err
	}
	defer func() { _ = done() }()
	names, err := remotemanifest.List(ctx, st, loc)
	if err != nil {
		return -1, err
	}
	if slices.Contains(names, name) {
		return 0, nil
	}
	for _, sub := range names {
		k, n, ok := ParseShardName(sub)
		if !ok || n == cfg.Shard.Count || k < 0 {
			continue
		}
		inner, err := remotemanifest.List(ctx, st, loc.Child(strings.TrimSuffix(loc.Key, "/")+"/"+sub))
		if err != nil {
			return -1, err
		}
		if slices.Contains(inner, name) {
			return n, nil
		}
	}
	return -1, nil
}

// objectsFor returns the store to reach dir (cfg.Objects, or a new one that done closes) and dir
// parsed.
func objectsFor(cfg *Config, dir string) (*objstore.Store, func() error, objstore.Location, error) {
	loc, err := objstore.Parse(dir)
	if err != nil {
		return nil, nil, objstore.Location{}, fmt.Errorf("manifest directory: %w", err)
	}
	if cfg.Objects != nil {
		return cfg.Objects, func() error { return nil }, loc, nil
	}
	st := objstore.New()
	return st, st.Close, loc, nil
}

// peekManifest opens the load's manifest in dir for reading (loader status --shards): a local one in
// place, an object-store one from a copy fetched to a temporary file. It returns os.ErrNotExist
// (wrapped) when there is none, and manifest.ErrLocked when a running load holds a local one.
func peekManifest(ctx context.Context, cfg *Config, dir, key string) (*manifest.Manifest, func() error, string, error) {
	name := filepath.Base(manifest.Path("", key, cfg.Table.String()))
	if !objstore.IsURL(dir) {
		path := manifest.Path(dir, key, cfg.Table.String())
		if _, err := os.Stat(path); err != nil {
			return nil, nil, path, err
		}
		m, err := manifest.Open(path)
		if err != nil {
			return nil, nil, path, err
		}
		return m, m.Close, path, nil
	}
	where := joinManifestDir(dir, name)
	st, done, loc, err := objectsFor(cfg, dir)
	if err != nil {
		return nil, nil, where, err
	}
	defer func() { _ = done() }()
	data, err := remotemanifest.Fetch(ctx, st, loc, name)
	if errors.Is(err, objstore.ErrNotFound) {
		return nil, nil, where, fmt.Errorf("%s: %w", where, os.ErrNotExist)
	}
	if err != nil {
		return nil, nil, where, err
	}
	tmp, err := os.MkdirTemp("", "loader-status-")
	if err != nil {
		return nil, nil, where, err
	}
	path := filepath.Join(tmp, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		_ = os.RemoveAll(tmp)
		return nil, nil, where, err
	}
	m, err := manifest.Open(path)
	if err != nil {
		_ = os.RemoveAll(tmp)
		return nil, nil, where, err
	}
	return m, func() error {
		err := m.Close()
		_ = os.RemoveAll(tmp)
		return err
	}, where, nil
}
