package bench

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/loaderproject/loader/readers"
)

// DefaultThrottleRun is how long a throttled loader run lasts at least, at the rate it is expected
// to reach (Throttle.Run): long enough that the start of the streams (a READY round trip, the first
// acknowledgement's latency) and the end of the slowest stream weigh little, as they do in a real
// backfill that runs for minutes.
const DefaultThrottleRun = 8 * time.Second

// maxCopies bounds how many times a throttled run loads the dataset.
const maxCopies = 64

// copiesFor is how many times a throttled run of the loader at the given expected rate (bytes/s)
// loads a dataset of datasetBytes so that it lasts at least run seconds: at least 1, at most
// maxCopies.
func copiesFor(run, expected float64, datasetBytes int64) int {
	if datasetBytes <= 0 || expected <= 0 || run <= 0 {
		return 1
	}
	k := math.Ceil(run * expected / float64(datasetBytes))
	return int(min(max(k, 1), maxCopies))
}

// copies makes (once) and returns the sources of the dataset loaded k times: directories copy-0 to
// copy-(k-1) in dir, each holding every file of the dataset as a hard link (a copy of the bytes
// where the file system cannot link), under its own numbered directory so that names cannot clash,
// followed by its Hive partition directories so that the partition columns read the same. Include
// and exclude filters were applied to files already, so the copies are loaded without them.
func copies(dir string, files []readers.File, k int) ([]string, error) {
	var srcs []string
	for c := range k {
		root := filepath.Join(dir, fmt.Sprintf("copy-%03d", c))
		srcs = append(srcs, root)
		if _, err := os.Stat(root); err == nil {
			continue // made for an earlier run
		}
		tmp := root + ".tmp"
		if err := os.RemoveAll(tmp); err != nil {
			return nil, err
		}
		for i, f := range files {
			d := filepath.Join(tmp, fmt.Sprintf("%06d", i))
			for _, p := range f.Partitions {
				d = filepath.Join(d, url.PathEscape(p.Key)+"="+url.PathEscape(p.Value))
			}
			if err := os.MkdirAll(d, 0o755); err != nil {
				return nil, err
			}
			if err := linkOrCopy(f.Path, filepath.Join(d, filepath.Base(f.Path))); err != nil {
				return nil, fmt.Errorf("bench: copy %s for the throttled runs: %w", f.Path, err)
			}
		}
		if err := os.Rename(tmp, root); err != nil {
			return nil, err
		}
	}
	return srcs, nil
}

func linkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	return errors.Join(err, out.Close())
}
