package readers

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/loaderproject/loader/objstore"
)

// DiscoverOption configures Discover.
type DiscoverOption func(*discoverConfig)

type discoverConfig struct {
	include, exclude []string
	store            *objstore.Store
	format           Format
	logger           *slog.Logger
}

// WithInclude keeps only files matching at least one of the globs (doublestar syntax: *, ?, [..],
// {a,b} and ** across directories). A glob with a '/' is matched against the path relative to the
// source it was found under; one without is matched against the file name. Default: every file.
// An invalid glob makes Discover fail.
func WithInclude(globs ...string) DiscoverOption {
	return func(c *discoverConfig) { c.include = append(c.include, globs...) }
}

// WithExclude drops files matching any of the globs, matched as WithInclude matches. Default: none.
func WithExclude(globs ...string) DiscoverOption {
	return func(c *discoverConfig) { c.exclude = append(c.exclude, globs...) }
}

// WithFormat reads every discovered file as format f whatever its name, for files with unusual
// extensions (data.txt holding CSV). Magic bytes still win: a file starting with PAR1 is Parquet.
// Default FormatUnknown: the format comes from the extension and magic bytes, and directories skip
// files whose format cannot be told.
func WithFormat(f Format) DiscoverOption { return func(c *discoverConfig) { c.format = f } }

// WithDiscoverLogger logs skipped entries at debug level. Default: discard.
func WithDiscoverLogger(l *slog.Logger) DiscoverOption {
	return func(c *discoverConfig) {
		if l != nil {
			c.logger = l
		}
	}
}

// Discover expands sources (files, directories walked recursively, and globs) into files in a
// deterministic order: sources in the order given, each expanded in lexical path order, duplicates
// removed. Hidden and metadata entries are skipped: names starting with "." or "_" (such as _SUCCESS
// and _delta_log) and *.crc files. The format comes from the extension (.parquet/.parq/.pq, .csv/.tsv,
// .arrow/.feather/.ipc, .arrows) and is checked against the magic bytes. A source that matches no file
// is an error wrapping ErrNoFiles.
//
// Beneath a directory or glob, files whose format cannot be told (README.md, data.json) are skipped;
// a file named explicitly must have a known format (ErrUnknownFormat) unless WithFormat is given.
// CSV files may be compressed: .csv.gz and .csv.zst (and .tsv.*) are recognised, as are gzip and zstd
// magic bytes. Discover reads the first bytes of each file; a file whose content does not match its
// extension is still returned (Open reports it), so one bad file never hides the others.
func Discover(ctx context.Context, sources []string, opts ...DiscoverOption) ([]File, error) {
	var out []File
	err := DiscoverFunc(ctx, sources, func(f File) error {
		out = append(out, f)
		return nil
	}, opts...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DiscoverFunc is Discover calling fn with each file as it is found instead of collecting them, so
// a prefix of a million objects yields its first file after one list request, with one page of the
// listing in memory per directory level. Duplicates across sources are removed (remembering the
// files found, when there are several sources). fn's error stops the discovery and is returned as
// it is.
func DiscoverFunc(ctx context.Context, sources []string, fn func(File) error, opts ...DiscoverOption) error {
	cfg := discoverConfig{logger: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(&cfg)
	}
	for _, g := range append(append([]string(nil), cfg.include...), cfg.exclude...) {
		if !doublestar.ValidatePattern(filepath.ToSlash(g)) {
			return fmt.Errorf("invalid glob %q", g)
		}
	}
	var seen map[string]bool
	if len(sources) > 1 {
		seen = map[string]bool{}
	}
	for _, src := range sources {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := 0
		emit := func(f File) error {
			n++ // a duplicate still counts as a match for this source
			if seen != nil {
				key := f.Path
				if f.Store == nil {
					if abs, err := filepath.Abs(f.Path); err == nil {
						key = abs
					}
				}
				if seen[key] {
					return nil
				}
				seen[key] = true
			}
			if err := fn(f); err != nil {
				return &callerError{err}
			}
			return nil
		}
		var err error
		if objstore.IsURL(src) {
			err = discoverObjects(ctx, src, &cfg, emit)
		} else {
			var files []File
			files, err = discoverOne(ctx, src, &cfg)
			for _, f := range files {
				if err == nil {
					err = emit(f)
				}
			}
		}
		var ce *callerError
		if errors.As(err, &ce) {
			return ce.err
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("%w %q", ErrNoFiles, src)
		}
	}
	return nil
}

func hasMeta(s string) bool { return strings.ContainsAny(s, "*?[{") }

// skipName reports whether a directory entry below a source root is hidden or metadata.
func skipName(name string, isDir bool) bool {
	if strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
		return true
	}
	return !isDir && strings.HasSuffix(strings.ToLower(name), ".crc")
}

func discoverOne(ctx context.Context, src string, cfg *discoverConfig) ([]File, error) {
	st, statErr := os.Stat(src)
	if statErr == nil && !st.IsDir() {
		// an explicit file: hidden names are taken as given
		if !cfg.keep(filepath.Base(src), filepath.Base(src)) {
			return nil, nil
		}
		f, err := describe(src, st, cfg.format, true)
		if err != nil {
			return nil, err
		}
		f.Rel = filepath.Base(src)
		return []File{f}, nil
	}
	root, pattern := src, ""
	if statErr != nil {
		if !hasMeta(src) {
			if errors.Is(statErr, fs.ErrNotExist) {
				return nil, fmt.Errorf("%w %q: no such file or directory", ErrNoFiles, src)
			}
			return nil, fmt.Errorf("%s: %w", src, statErr)
		}
		base, pat := doublestar.SplitPattern(filepath.ToSlash(src))
		if !doublestar.ValidatePattern(pat) {
			return nil, fmt.Errorf("invalid glob %q", src)
		}
		root, pattern = filepath.FromSlash(base), pat
		if st, err := os.Stat(root); err != nil || !st.IsDir() {
			return nil, nil
		}
	}
	var out []File
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == root {
				return err
			}
			cfg.logger.Debug("readers: skipping unreadable entry", "path", path, "err", err)
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if path == root {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		relSlash := filepath.ToSlash(rel)
		isDir := d.IsDir()
		if d.Type()&fs.ModeSymlink != 0 {
			if st, err := os.Stat(path); err == nil {
				isDir = st.IsDir()
			}
		}
		if skipName(d.Name(), isDir) {
			cfg.logger.Debug("readers: skipping hidden or metadata entry", "path", path)
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if isDir {
			return nil
		}
		if pattern != "" {
			if ok, _ := doublestar.Match(pattern, relSlash); !ok {
				return nil
			}
		}
		if !cfg.keep(relSlash, d.Name()) {
			return nil
		}
		st, err := os.Stat(path)
		if err != nil {
			cfg.logger.Debug("readers: skipping unreadable file", "path", path, "err", err)
			return nil
		}
		f, err := describe(path, st, cfg.format, false)
		if err != nil {
			return err
		}
		if f.Format == FormatUnknown {
			cfg.logger.Debug("readers: skipping file of unknown format", "path", path)
			return nil
		}
		f.Partitions = hivePartitions(relSlash)
		f.Rel = relSlash
		out = append(out, f)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	return out, nil
}

// keep applies the include and exclude globs to a file's relative path or name.
func (c *discoverConfig) keep(rel, name string) bool {
	match := func(g string) bool {
		g = filepath.ToSlash(g)
		target := name
		if strings.Contains(g, "/") {
			target = rel
		}
		ok, _ := doublestar.Match(g, target)
		return ok
	}
	if len(c.include) > 0 {
		any := false
		for _, g := range c.include {
			if match(g) {
				any = true
				break
			}
		}
		if !any {
			return false
		}
	}
	for _, g := range c.exclude {
		if match(g) {
			return false
		}
	}
	return true
}

// hivePartitions parses key=value directory components of a relative file path.
func hivePartitions(rel string) []Partition {
	parts := strings.Split(rel, "/")
	var out []Partition
	for _, p := range parts[:len(parts)-1] {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			continue
		}
		if uk, err := url.PathUnescape(k); err == nil {
			k = uk
		}
		if uv, err := url.PathUnescape(v); err == nil {
			v = uv
		}
		out = append(out, Partition{Key: k, Value: v})
	}
	return out
}

func describe(path string, st fs.FileInfo, force Format, explicit bool) (File, error) {
	f := File{Path: path, Size: st.Size(), ModTime: st.ModTime()}
	fm, err := detectFormat(path, force)
	if err != nil {
		if explicit {
			return File{}, fileError(path, err)
		}
		fm = FormatUnknown
	}
	f.Format = fm
	return f, nil
}

// extFormat maps a file name to the format its extension names.
func extFormat(name string) Format {
	n := strings.ToLower(name)
	for _, c := range []string{".gz", ".gzip", ".zst", ".zstd"} {
		if strings.HasSuffix(n, c) {
			n = strings.TrimSuffix(n, c)
			if e := filepath.Ext(n); e == ".csv" || e == ".tsv" {
				return FormatCSV
			}
			return FormatUnknown
		}
	}
	switch filepath.Ext(n) {
	case ".parquet", ".parq", ".pq":
		return FormatParquet
	case ".csv", ".tsv":
		return FormatCSV
	case ".arrow", ".feather", ".ipc", ".arrow_file":
		return FormatIPCFile
	case ".arrows", ".stream":
		return FormatIPCStream
	}
	return FormatUnknown
}

var (
	magicParquet    = []byte("PAR1")
	magicParquetEnc = []byte("PARE")
	magicArrow      = []byte("ARROW1")
	magicGzip       = []byte{0x1f, 0x8b}
	magicZstd       = []byte{0x28, 0xb5, 0x2f, 0xfd}
)

// sniff reads the first 8 bytes of a file (fewer when it is shorter), and tells its size.
func sniff(path string) ([]byte, int64, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, 0, err
	}
	head := make([]byte, 8)
	n, err := io.ReadFull(fh, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, st.Size(), err
	}
	return head[:n], st.Size(), nil
}

func sniffBytes(head []byte, size int64) Format {
	switch {
	case bytes.HasPrefix(head, magicParquet), bytes.HasPrefix(head, magicParquetEnc):
		return FormatParquet
	case bytes.HasPrefix(head, magicArrow):
		return FormatIPCFile
	case len(head) >= 8 && binary.LittleEndian.Uint32(head) == 0xFFFFFFFF:
		// continuation marker then a metadata length that fits the file
		if l := int64(binary.LittleEndian.Uint32(head[4:])); l > 0 && l+8 <= size {
			return FormatIPCStream
		}
	}
	return FormatUnknown
}

// legacyStreamPrefix reports whether head starts with a pre-0.15 IPC stream length prefix.
func legacyStreamPrefix(head []byte, size int64) bool {
	if len(head) < 4 {
		return false
	}
	l := int64(int32(binary.LittleEndian.Uint32(head)))
	return l > 0 && l+4 <= size
}

// detectFormat decides a file's format from its extension (or force) and its magic bytes. Its
// errors do not name the file: callers wrap them in a *FileError.
func detectFormat(path string, force Format) (Format, error) {
	head, size, err := sniff(path)
	if err != nil {
		return FormatUnknown, err
	}
	byExt := extFormat(filepath.Base(path))
	if force != FormatUnknown {
		byExt = force
	}
	return formatOf(byExt, head, size)
}

// formatOf decides the format of a file of size bytes whose name (or a format given for it) says
// byExt and whose first bytes are head, for local files and objects alike.
func formatOf(byExt Format, head []byte, size int64) (Format, error) {
	byMagic := sniffBytes(head, size)
	switch {
	case byMagic != FormatUnknown && byExt != FormatCSV:
		// PAR1 and ARROW1 are definitive; an IPC extension decides nothing more.
		return byMagic, nil
	case byMagic == FormatParquet || byMagic == FormatIPCFile:
		return byMagic, nil // a .csv that is really Parquet or Arrow
	case byExt == FormatIPCFile || byExt == FormatIPCStream:
		// no magic: a legacy stream (length prefix without continuation), or a corrupt file that
		// Open will report
		if legacyStreamPrefix(head, size) {
			return FormatIPCStream, nil
		}
		return byExt, nil
	case byExt != FormatUnknown:
		return byExt, nil
	}
	return FormatUnknown, fmt.Errorf("%w (use .parquet, .csv, .tsv, .arrow, .feather, .ipc or .arrows, or name the format)", ErrUnknownFormat)
}
