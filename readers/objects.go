package readers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/loaderproject/loader/internal/ipcguard"
	"github.com/loaderproject/loader/objstore"
)

// WithObjectStore lets Discover expand s3://, gs:// and azblob:// sources through s, which the
// files it returns carry (File.Store) so that Open reads them through it. Without it an object URL
// is an error.
func WithObjectStore(s *objstore.Store) DiscoverOption {
	return func(c *discoverConfig) { c.store = s }
}

// PrefetchBudget is the byte budget that bytes read ahead of decoding are counted in (the load's
// in-flight budget). Acquire blocks until n bytes fit or ctx ends; Release returns them.
type PrefetchBudget interface {
	Acquire(ctx context.Context, n int64) error
	Release(n int64)
}

// WithPrefetchBudget counts in b the bytes an object-store Parquet row group prefetches, from
// before its GETs until it is decoded. Each prefetch counts at most cap bytes (a row group larger
// than that is counted as cap), so that units reading at once cannot hold the whole budget; cap
// below 1 counts every byte. Default: no budget.
func WithPrefetchBudget(b PrefetchBudget, cap int64) Option {
	return func(c *config) {
		if b != nil {
			c.prefetch = cappedBudget{b, cap}
		}
	}
}

type cappedBudget struct {
	b   PrefetchBudget
	cap int64
}

func (c cappedBudget) size(n int64) int64 {
	if c.cap > 0 {
		return min(n, c.cap)
	}
	return n
}
func (c cappedBudget) Acquire(ctx context.Context, n int64) error { return c.b.Acquire(ctx, c.size(n)) }
func (c cappedBudget) Release(n int64)                            { c.b.Release(c.size(n)) }

// object is the objstore view of an object-store File.
func (f File) object() (objstore.Object, error) {
	loc, err := objstore.Parse(f.Path)
	if err != nil {
		return objstore.Object{}, err
	}
	return objstore.Object{Loc: loc, Size: f.Size, ModTime: f.ModTime, ETag: f.ETag}, nil
}

// readerAtCloser is an opened file's bytes.
type readerAtCloser interface {
	io.ReaderAt
	io.Closer
}

// openBytes opens f's bytes: the local file, or a Reader of the object's listed version.
func openBytes(ctx context.Context, f File) (readerAtCloser, error) {
	if f.Store == nil {
		return os.Open(f.Path)
	}
	return openObject(ctx, f)
}

func openObject(ctx context.Context, f File) (*objstore.Reader, error) {
	obj, err := f.object()
	if err != nil {
		return nil, err
	}
	return f.Store.Open(ctx, obj)
}

// objectFormat tells an object's format from its name, or from its first bytes (one small GET)
// when the name does not say or force asks for a check.
func objectFormat(ctx context.Context, f File, force Format) (Format, error) {
	byExt := extFormat(path.Base(f.Path))
	if force != FormatUnknown {
		byExt = force
	}
	if byExt == FormatParquet || byExt == FormatCSV && force == FormatUnknown {
		return byExt, nil // Open checks the magic bytes (Parquet's footer, CSV's compression)
	}
	r, err := openObject(ctx, f)
	if err != nil {
		return FormatUnknown, err
	}
	head := make([]byte, min(8, f.Size))
	if _, err := r.ReadAt(head, 0); err != nil && !errors.Is(err, io.EOF) {
		return FormatUnknown, err
	}
	byMagic := sniffBytes(head, f.Size)
	switch {
	case byMagic != FormatUnknown && byExt != FormatCSV, byMagic == FormatParquet, byMagic == FormatIPCFile:
		return byMagic, nil
	case byExt == FormatIPCFile || byExt == FormatIPCStream:
		if legacyStreamPrefix(head, f.Size) {
			return FormatIPCStream, nil
		}
		return byExt, nil
	case byExt != FormatUnknown:
		return byExt, nil
	}
	return FormatUnknown, fmt.Errorf("%w (use .parquet, .csv, .tsv, .arrow, .feather, .ipc or .arrows, or name the format)", ErrUnknownFormat)
}

// discoverObjects expands an object-store source (a single object, a prefix, or a glob) as
// discoverOne expands a local one: hidden and metadata entries skipped (hidden "directories" are not
// even listed), include and exclude applied to the key relative to the source, Hive partitions
// parsed, files of unknown format skipped below a prefix. Objects come in lexical key order, one
// listing page at a time.
func discoverObjects(ctx context.Context, src string, cfg *discoverConfig, emit func(File) error) error {
	if cfg.store == nil {
		return fmt.Errorf("%s: no object store configured for %s:// sources", redactURL(src), strings.SplitN(src, ":", 2)[0])
	}
	loc, err := objstore.Parse(src)
	if err != nil {
		return err
	}
	key, pattern := loc.Key, ""
	if hasMeta(key) {
		base, pat := doublestar.SplitPattern(key)
		if !doublestar.ValidatePattern(pat) {
			return fmt.Errorf("invalid glob %q", loc.String())
		}
		key, pattern = base, pat
		if key == "." {
			key = ""
		}
		if key != "" {
			key += "/"
		}
	}
	if pattern == "" && key != "" && !strings.HasSuffix(key, "/") {
		// a single object, or a prefix named without its trailing slash
		obj, err := cfg.store.Stat(ctx, loc)
		if err == nil {
			name := path.Base(key)
			if !cfg.keep(name, name) {
				return nil
			}
			f := objectFile(cfg, obj, "")
			if f.Format == FormatUnknown {
				if f.Format, err = objectFormat(ctx, f, FormatUnknown); err != nil {
					return fileError(f.Path, err)
				}
			}
			return emit(f)
		}
		if !errors.Is(err, objstore.ErrNotFound) {
			return err
		}
		key += "/"
	}
	root := key
	descend := func(dir string) bool {
		name := path.Base(strings.TrimSuffix(dir, "/"))
		if skipName(name, true) {
			cfg.logger.Debug("readers: skipping hidden or metadata prefix", "prefix", loc.Child(dir).String())
			return false
		}
		return true
	}
	return cfg.store.Walk(ctx, loc.Child(root), descend, func(obj objstore.Object) error {
		rel := strings.TrimPrefix(obj.Loc.Key, root)
		if rel == "" || strings.HasSuffix(rel, "/") {
			return nil // a "directory" marker object
		}
		name := path.Base(rel)
		if skipName(name, false) {
			cfg.logger.Debug("readers: skipping hidden or metadata entry", "path", obj.URL())
			return nil
		}
		if pattern != "" {
			if ok, _ := doublestar.Match(pattern, rel); !ok {
				return nil
			}
		}
		if !cfg.keep(rel, name) {
			return nil
		}
		f := objectFile(cfg, obj, rel)
		if f.Format == FormatUnknown {
			cfg.logger.Debug("readers: skipping file of unknown format", "path", f.Path)
			return nil
		}
		return emit(f)
	})
}

// objectFile is the File of a listed object; rel is its key relative to the source, for Hive
// partitions.
func objectFile(cfg *discoverConfig, obj objstore.Object, rel string) File {
	f := File{Path: obj.URL(), Size: obj.Size, ModTime: obj.ModTime, ETag: obj.ETag, Store: cfg.store}
	f.Format = extFormat(path.Base(obj.Loc.Key))
	if cfg.format != FormatUnknown {
		f.Format = cfg.format
	}
	if rel != "" {
		f.Partitions = hivePartitions(rel)
	}
	return f
}

func redactURL(s string) string {
	if i := strings.IndexByte(s, '?'); i >= 0 {
		return s[:i]
	}
	return s
}

// footerGuess is how many bytes of a Parquet object's end the first (suffix-range) request asks
// for: most footers fit, and a larger one takes one more request.
const footerGuess = 64 << 10

// prefetchGap is the most bytes between two column chunks that a prefetch reads through to make one
// request of two.
const prefetchGap = 64 << 10

// prefetch fetches the column chunks of row group unit with as few GETs as the store's range size
// allows (adjacent chunks merged), in parallel, counted in the prefetch budget until release.
func (s *parquetSource) prefetch(ctx context.Context, unit int) (io.ReaderAt, func(), error) {
	rg := s.meta.RowGroup(unit)
	var ranges []objstore.Range
	var total int64
	for c := 0; c < rg.NumColumns(); c++ {
		cc, err := rg.ColumnChunk(c)
		if err != nil {
			return nil, nil, corrupt(err)
		}
		off := cc.DataPageOffset()
		if cc.HasDictionaryPage() && cc.DictionaryPageOffset() > 0 && cc.DictionaryPageOffset() < off {
			off = cc.DictionaryPageOffset()
		}
		n := cc.TotalCompressedSize()
		if off < 0 || n <= 0 {
			continue // the decoder reports a chunk it cannot find
		}
		ranges = append(ranges, objstore.Range{Off: off, Len: n})
		total += n
	}
	return fetchCounted(ctx, s.obj, s.cfg.prefetch, ranges, min(total, s.f.Size))
}

// fetchCounted fetches ranges of obj with merged parallel ranged GETs, after taking size bytes from
// budget b (nil: none); release gives them back once the caller has decoded what it fetched.
func fetchCounted(ctx context.Context, obj *objstore.Reader, b PrefetchBudget, ranges []objstore.Range, size int64) (io.ReaderAt, func(), error) {
	release := func() {}
	if b != nil {
		if err := b.Acquire(ctx, size); err != nil {
			return nil, nil, err
		}
		release = func() { b.Release(size) }
	}
	pf, err := obj.Prefetch(ctx, ranges, prefetchGap)
	if err != nil {
		release()
		return nil, nil, err
	}
	return pf, release, nil
}

// prefetch fetches the messages of record batches [first, end) of an Arrow IPC object and its
// dictionaries, as its footer places them (or, when the footer cannot be read here, their even
// share of the object widened by a batch's share each side), with merged parallel ranged GETs
// counted in the prefetch budget until release. A read outside them costs a GET of its own.
func (s *ipcFileSource) prefetch(ctx context.Context, first, end int) (io.ReaderAt, func(), error) {
	var ranges []objstore.Range
	if s.blocksOK && end <= len(s.records) {
		for _, b := range append(append([]ipcguard.Block(nil), s.dicts...), s.records[first:end]...) {
			ranges = append(ranges, objstore.Range{Off: b.Off, Len: b.Len})
		}
	} else {
		n := int64(max(s.batches, 1))
		per := s.f.Size / n
		from := max(0, s.f.Size*int64(first)/n-per)
		to := min(s.f.Size, s.f.Size*int64(end)/n+per)
		ranges = []objstore.Range{{Off: from, Len: to - from}}
	}
	var total int64
	for _, r := range ranges {
		total += r.Len
	}
	return fetchCounted(ctx, s.obj, s.cfg.prefetch, ranges, min(total, s.f.Size))
}

// openStream opens f for a sequential read from its start: the bytes to check at random (local:
// the file; object: exact ranged GETs) and the reader. For an object the reader is one GET with
// read-ahead when whole (a unit reads to the end), else small blocks (Open reads just a schema).
func openStream(ctx context.Context, f File, whole bool) (io.ReaderAt, io.ReadCloser, error) {
	if f.Store == nil {
		fh, err := os.Open(f.Path)
		if err != nil {
			return nil, nil, err
		}
		return fh, fh, nil
	}
	obj, err := openObject(ctx, f)
	if err != nil {
		return nil, nil, err
	}
	if !whole {
		return obj, io.NopCloser(io.NewSectionReader(obj.Blocks(256<<10, 1), 0, f.Size)), nil
	}
	rd, err := obj.Stream(ctx, 0)
	if err != nil {
		return nil, nil, err
	}
	return obj, rd, nil
}
