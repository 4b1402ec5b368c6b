package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/loaderproject/loader/embedded"
	"github.com/loaderproject/loader/load"
	"github.com/loaderproject/loader/manifest"
	remotemanifest "github.com/loaderproject/loader/manifest/remote"
	"github.com/loaderproject/loader/objstore"
	"github.com/loaderproject/loader/tableschema"
)

// statusLong is loader status's help: the per-file form (this file) and the --shards form
// (status_shards.go).
const statusLong = `Without --shards: read the manifests of loads into table --table (one per target) and show, per
source file, its units done, the row ranges sent but not acknowledged (pending: the target may or
may not hold them), why the last run gave the file up (failed), and the row ranges sent again while
an earlier send's fate was unknown (possibly duplicated: the target may hold them twice, unless it
stores each unit range once, as the embedded sink does). Manifests are read from --manifest-dir,
from the warehouse of --warehouse (where loads into the embedded sink keep them), or from
$XDG_STATE_HOME/loader/manifests. A running load is not disturbed.

`

// statusFiles is loader status without --shards: what the manifests in dir (or in the warehouse's
// manifest directory, when wh is not empty) say of each file of the table's loads.
func (a *app) statusFiles(ctx context.Context, table, dir, wh string, asJSON bool) error {
	name, err := tableschema.ParseTableName(table)
	if err != nil {
		return usageError{fmt.Errorf("--table: %w", err)}
	}
	switch {
	case dir != "" && wh != "":
		return usagef("give at most one of --manifest-dir and --warehouse")
	case wh != "":
		dir = embedded.New(wh).ManifestDir()
	case dir == "":
		dir = load.DefaultManifestDir()
	}
	infos, err := manifestsOf(ctx, dir, name.String())
	if err != nil {
		return err
	}
	if asJSON {
		if infos == nil {
			infos = []manifest.Info{}
		}
		return json.NewEncoder(a.stdout).Encode(infos)
	}
	a.printStatus(infos, name.String(), dir)
	return nil
}

// manifestsOf reads the manifests in dir about table: those whose header names it, and older ones
// whose file name does.
func manifestsOf(ctx context.Context, dir, table string) ([]manifest.Info, error) {
	if objstore.IsURL(dir) {
		return remoteManifestsOf(ctx, dir, table)
	}
	paths, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no manifests: %s does not exist", dir)
	}
	var out []manifest.Info
	for _, p := range paths {
		info, err := manifest.Inspect(p)
		if err != nil {
			return nil, err
		}
		match := info.Table == table
		if info.Table == "" {
			match = namedFor(filepath.Base(p), table)
		}
		if match {
			out = append(out, info)
		}
	}
	return out, nil
}

func (a *app) printStatus(infos []manifest.Info, table, dir string) {
	if len(infos) == 0 {
		fmt.Fprintf(a.stdout, "no manifest of %s in %s\n", table, dir)
		return
	}
	for _, info := range infos {
		fmt.Fprintf(a.stdout, "manifest %s\n  target %s, table %s, epoch %d, %d rows possibly duplicated in all\n",
			info.Path, orDash(info.Target), orDash(info.Table), info.Epoch, info.PossiblyDuplicatedRows)
		tw := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  FILE\tUNITS DONE\tROWS ACKED\tPENDING ROWS\tPOSSIBLY DUPLICATED ROWS\tFAILED")
		for _, f := range info.Files {
			var done int
			var acked, pending, dup int64
			for _, u := range f.Units {
				if u.Done {
					done++
				}
				acked += rangeRows(u.Acked)
				pending += rangeRows(u.Pending)
				dup += rangeRows(u.Duplicated)
			}
			fmt.Fprintf(tw, "  %s\t%d of %d seen\t%d\t%d\t%d\t%s\n", f.Path, done, len(f.Units), acked, pending, dup, orDash(f.Failed))
		}
		_ = tw.Flush()
		for _, f := range info.Files {
			for _, u := range f.Units {
				if len(u.Pending) > 0 {
					fmt.Fprintf(a.stdout, "  pending %s unit %d rows %s\n", f.Path, u.Unit, ranges(u.Pending))
				}
				if len(u.Duplicated) > 0 {
					fmt.Fprintf(a.stdout, "  possibly duplicated %s unit %d rows %s\n", f.Path, u.Unit, ranges(u.Duplicated))
				}
			}
		}
	}
}

func rangeRows(rs []manifest.Range) int64 {
	var n int64
	for _, r := range rs {
		n += r.To - r.From
	}
	return n
}

func ranges(rs []manifest.Range) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf("[%d,%d)", r.From, r.To)
	}
	return strings.Join(parts, " ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// namedFor reports whether a manifest file name is about table, for older manifests whose header
// does not say (see manifest.Path).
func namedFor(name, table string) bool {
	probe := filepath.Base(manifest.Path("", "x", table))
	_, tail, _ := strings.Cut(probe, "__")
	tail, _, _ = strings.Cut(tail, "-")
	return strings.Contains(name, "__"+tail+"-")
}

// remoteManifestsOf is manifestsOf for a manifest directory in object storage.
func remoteManifestsOf(ctx context.Context, dir, table string) ([]manifest.Info, error) {
	loc, err := objstore.Parse(dir)
	if err != nil {
		return nil, usageError{fmt.Errorf("--manifest-dir: %w", err)}
	}
	st := objstore.New()
	defer st.Close()
	names, err := remotemanifest.List(ctx, st, loc)
	if err != nil {
		return nil, err
	}
	var out []manifest.Info
	for _, name := range names {
		data, err := remotemanifest.Fetch(ctx, st, loc, name)
		if err != nil {
			return nil, err
		}
		info, err := manifest.InspectData(strings.TrimSuffix(dir, "/")+"/"+name, data)
		if err != nil {
			return nil, err
		}
		if info.Table == table || info.Table == "" && namedFor(name, table) {
			out = append(out, info)
		}
	}
	return out, nil
}
