// Package remote keeps a load's manifest in object storage (loader load --manifest-dir s3://…,
// gs://… or azblob://…), for jobs on machines that do not keep their disks.
//
// The manifest itself is the local one (package manifest), in a temporary directory, with a
// manifest.Replica that mirrors every byte it makes durable into objects under one prefix:
//
//	PREFIX/lock              who holds the manifest, and a heartbeat
//	PREFIX/0000000000000007  "B" and the whole file: a base, written when the manifest was opened or reset
//	PREFIX/0000000000000008  "S" and the bytes appended by one Sync: a segment, in order after the base
//	PREFIX/0000000000000009  …
//
// Every object is written with If-None-Match (a conditional create), numbered one after the other
// in one sequence, so two writers can never both extend the same manifest: the second one's create
// of the same number fails. Open
// reads the newest base and the segments after it, without gaps, replays them as the local
// manifest does (a torn segment cannot exist: each is one PUT), then writes a new base and deletes
// the older objects.
//
// # The lock
//
// Open creates PREFIX/lock (If-None-Match). While the manifest is open, a heartbeat rewrites it
// every Heartbeat (If-Match its last ETag). When the lock exists, Open watches it for StaleAfter: if
// its ETag changes, another loader holds the manifest and Open fails with manifest.ErrLocked; if it
// does not (the holder was killed), Open takes it over with If-Match, so exactly one of several
// waiting runs wins. A holder that finds its lock taken (its heartbeat's If-Match fails) fails its
// next Sync: it stops loading rather than write beside the new holder. So a re-run after a crash
// waits up to StaleAfter (default 30 s) before it starts.
//
// Durability: a Sync returns once its segment is stored. On object stores that acknowledge a PUT
// only when it is durable (S3, GCS, Azure), an acknowledged row is recorded remotely before the
// loader counts it.
package remote

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/loaderproject/loader/manifest"
	"github.com/loaderproject/loader/objstore"
)

// Defaults for Options.
const (
	DefaultHeartbeat  = 10 * time.Second
	DefaultStaleAfter = 30 * time.Second
)

// Options configure Open. Zero values take the defaults.
type Options struct {
	// Heartbeat is how often the lock is rewritten while the manifest is open.
	Heartbeat time.Duration
	// StaleAfter is how long Open watches a lock that exists before it takes it over: a lock whose
	// heartbeat did not move for that long belongs to a loader that is gone. It should be at least
	// three heartbeats.
	StaleAfter time.Duration
	// Logger gets a line when Open waits on a lock and when it takes one over. Default: discard.
	Logger *slog.Logger
	// Manifest options (manifest.WithLabel) for the local manifest.
	Manifest []manifest.Option
}

// Manifest is an open manifest in object storage: the local manifest, mirrored. Close it (not its
// embedded *manifest.Manifest) to release the lock and the temporary directory.
type Manifest struct {
	*manifest.Manifest
	r   *replica
	dir string
}

// Close closes the local manifest (its last Sync goes to the store), stops the heartbeat, deletes
// the lock and removes the temporary directory.
func (m *Manifest) Close() error {
	err := m.Manifest.Close()
	if rerr := m.r.release(); err == nil {
		err = rerr
	}
	_ = os.RemoveAll(m.dir)
	return err
}

// Location is the URL the manifest lives under (PREFIX above), for messages.
func (m *Manifest) Location() string { return m.r.prefix.String() }

// Open opens the manifest under prefix (a directory-like key; a trailing "/" is added), taking its
// lock as the package doc describes. name is the manifest's file name (manifest.Path's base), so a
// bucket holds one manifest per target and table, like a local directory.
func Open(ctx context.Context, st *objstore.Store, dir objstore.Location, name string, o Options) (*Manifest, error) {
	if o.Heartbeat <= 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	if o.StaleAfter <= 0 {
		o.StaleAfter = DefaultStaleAfter
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	prefix := dir.Child(joinKey(dir.Key, name) + "/")
	r := &replica{st: st, prefix: prefix, o: o, done: make(chan struct{})}
	if err := r.lock(ctx); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "loader-manifest-")
	if err != nil {
		_ = r.release()
		return nil, fmt.Errorf("manifest %s: %w", prefix, err)
	}
	fail := func(err error) (*Manifest, error) {
		_ = r.release()
		_ = os.RemoveAll(tmp)
		return nil, err
	}
	data, err := r.fetch(ctx)
	if err != nil {
		return fail(err)
	}
	local := filepath.Join(tmp, name)
	if err := os.WriteFile(local, data, 0o644); err != nil {
		return fail(fmt.Errorf("manifest %s: %w", prefix, err))
	}
	m, err := manifest.Open(local, append(slices.Clip(o.Manifest), manifest.WithReplica(r))...)
	if err != nil {
		return fail(fmt.Errorf("manifest %s: %w", prefix, err))
	}
	return &Manifest{Manifest: m, r: r, dir: tmp}, nil
}

// Fetch returns the manifest's bytes under dir and name as the store holds them (base and segments),
// without locking it, for loader status. A manifest that does not exist is an error wrapping
// objstore.ErrNotFound.
func Fetch(ctx context.Context, st *objstore.Store, dir objstore.Location, name string) ([]byte, error) {
	r := &replica{st: st, prefix: dir.Child(joinKey(dir.Key, name) + "/")}
	data, err := r.fetch(ctx)
	if err == nil && data == nil {
		err = &objstore.Error{URL: r.prefix.String(), Op: "list", Kind: objstore.ErrNotFound}
	}
	return data, err
}

func joinKey(dir, name string) string {
	if dir == "" {
		return name
	}
	return path.Join(dir, name)
}

// replica implements manifest.Replica over numbered objects, and holds the lock.
type replica struct {
	st     *objstore.Store
	prefix objstore.Location
	o      Options

	seq   int64    // the number of the last object written or read
	stale []string // keys of objects older than the last base, deleted after the next base

	mu       sync.Mutex
	lockETag string
	owner    string
	lost     error // set when the heartbeat finds the lock taken
	done     chan struct{}
	stopped  sync.WaitGroup
	released bool
}

const (
	kindBase = 'B'
	kindSeg  = 'S'
	lockName = "lock"
)

func objName(n int64) string { return fmt.Sprintf("%016d", n) }

// put creates the next object of the sequence: kind, then data.
func (r *replica) put(kind byte, data []byte) (string, error) {
	if err := r.lostErr(); err != nil {
		return "", err
	}
	r.seq++
	key := r.prefix.Key + objName(r.seq)
	body := make([]byte, 0, 1+len(data))
	body = append(append(body, kind), data...)
	loc := r.prefix.Child(key)
	if _, err := r.st.Create(context.Background(), loc, body); err != nil && !r.landed(loc, body, err) {
		return "", r.writeErr(err)
	}
	return key, nil
}

// landed reports whether a create of body at loc that failed with err stored body all the same:
// the SDK sent it again after it had landed, and the condition failed the retry; or the answer
// was lost (a 5xx, a cut or stalled connection) after the object was written. The object holding
// exactly our bytes is ours: a writer that took the lock over writes its own.
func (r *replica) landed(loc objstore.Location, body []byte, err error) bool {
	var oe *objstore.Error
	if !errors.As(err, &oe) || oe.Kind != nil && !errors.Is(err, objstore.ErrPrecondition) {
		return false // not the store's answer, or one that says the write did not happen
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o, serr := r.st.Stat(ctx, loc)
	if serr != nil || o.Size != int64(len(body)) {
		return false
	}
	got, rerr := readAll(ctx, r.st, o)
	if rerr != nil || !bytes.Equal(got, body) {
		return false
	}
	r.o.Logger.Warn("a manifest write failed but its object holds our bytes: it landed", "url", loc.String(), "error", err)
	return true
}

// Append writes the bytes as the next segment.
func (r *replica) Append(data []byte) error {
	key, err := r.put(kindSeg, data)
	if err != nil {
		return err
	}
	r.stale = append(r.stale, key)
	return nil
}

// Reset writes data as the next base, then deletes every older object (best effort: a leftover is
// ignored by the next Open, which reads from the newest base).
func (r *replica) Reset(data []byte) error {
	key, err := r.put(kindBase, data)
	if err != nil {
		return err
	}
	for _, k := range r.stale {
		if err := r.st.Delete(context.Background(), r.prefix.Child(k)); err != nil {
			r.o.Logger.Debug("manifest: could not delete an old object", "url", r.prefix.Child(k).String(), "err", err)
		}
	}
	r.stale = []string{key}
	return nil
}

// writeErr explains a lost conditional create: another loader wrote this manifest.
func (r *replica) writeErr(err error) error {
	if errors.Is(err, objstore.ErrPrecondition) {
		return fmt.Errorf("%s: another loader wrote this manifest (its lock was taken over): %w", r.prefix, manifest.ErrLocked)
	}
	return err
}

func (r *replica) lostErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lost
}

// fetch lists the prefix and returns the newest base followed by the segments after it (nil when
// the manifest has no objects yet). It sets r.seq and r.stale.
func (r *replica) fetch(ctx context.Context) ([]byte, error) {
	type obj struct {
		n int64
		o objstore.Object
	}
	var objs []obj
	err := r.st.Walk(ctx, r.prefix, func(string) bool { return false }, func(o objstore.Object) error {
		n, err := strconv.ParseInt(strings.TrimPrefix(o.Loc.Key, r.prefix.Key), 10, 64)
		if err == nil && n > 0 { // not the lock, nor anything else
			objs = append(objs, obj{n: n, o: o})
		}
		return nil
	})
	if err != nil && !errors.Is(err, objstore.ErrNotFound) {
		return nil, fmt.Errorf("manifest %s: %w", r.prefix, err)
	}
	slices.SortFunc(objs, func(a, b obj) int { return cmp.Compare(a.n, b.n) })
	r.stale = r.stale[:0]
	for _, o := range objs {
		r.stale = append(r.stale, o.o.Loc.Key)
		r.seq = max(r.seq, o.n)
	}
	// Read back from the newest object to the newest base.
	var parts [][]byte
	for i := len(objs) - 1; i >= 0; i-- {
		o := objs[i]
		if want := objs[len(objs)-1].n - int64(len(parts)); o.n != want {
			return nil, fmt.Errorf("manifest %s: object %s missing (found %s before it): %w", r.prefix, objName(want), objName(o.n), manifest.ErrCorrupt)
		}
		b, err := readAll(ctx, r.st, o.o)
		if err != nil {
			return nil, fmt.Errorf("manifest %s: %w", r.prefix, err)
		}
		if len(b) == 0 || b[0] != kindBase && b[0] != kindSeg {
			return nil, fmt.Errorf("manifest %s: object %s is not a manifest part: %w", r.prefix, objName(o.n), manifest.ErrCorrupt)
		}
		parts = append(parts, b[1:])
		if b[0] == kindBase {
			slices.Reverse(parts)
			return slices.Concat(parts...), nil
		}
	}
	if len(objs) > 0 {
		return nil, fmt.Errorf("manifest %s: segments without a base object: %w", r.prefix, manifest.ErrCorrupt)
	}
	return nil, nil
}

func readAll(ctx context.Context, st *objstore.Store, o objstore.Object) ([]byte, error) {
	rd, err := st.Open(ctx, o)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	b := make([]byte, o.Size)
	if o.Size == 0 {
		return b, nil
	}
	if _, err := rd.ReadAt(b, 0); err != nil {
		return nil, err
	}
	return b, nil
}

// lockBody is the lock object's content: who holds it, and a counter the heartbeat bumps so every
// rewrite changes the ETag.
type lockBody struct {
	Owner string    `json:"owner"`
	Host  string    `json:"host"`
	PID   int       `json:"pid"`
	Since time.Time `json:"since"`
	Beat  int64     `json:"beat"`
}

func (r *replica) body(beat int64, since time.Time) []byte {
	host, _ := os.Hostname()
	b, _ := json.Marshal(lockBody{Owner: r.owner, Host: host, PID: os.Getpid(), Since: since, Beat: beat})
	return b
}

// lock takes the lock object as the package doc describes, and starts the heartbeat.
func (r *replica) lock(ctx context.Context) error {
	var id [8]byte
	rand.Read(id[:])
	r.owner = hex.EncodeToString(id[:])
	since := time.Now().UTC()
	loc := r.prefix.Child(r.prefix.Key + lockName)
	etag, err := r.st.Create(ctx, loc, r.body(0, since))
	if errors.Is(err, objstore.ErrPrecondition) {
		etag, err = r.takeOver(ctx, loc, since)
	}
	if err != nil {
		return err
	}
	r.lockETag = etag
	r.stopped.Add(1)
	go r.heartbeat(loc, since)
	return nil
}

// takeOver watches an existing lock for StaleAfter and takes it when it did not move.
func (r *replica) takeOver(ctx context.Context, loc objstore.Location, since time.Time) (string, error) {
	held, err := r.st.Stat(ctx, loc)
	if errors.Is(err, objstore.ErrNotFound) { // released meanwhile: try once more to create it
		etag, cerr := r.st.Create(ctx, loc, r.body(0, since))
		if errors.Is(cerr, objstore.ErrPrecondition) {
			return "", fmt.Errorf("manifest %s: %w", r.prefix, manifest.ErrLocked)
		}
		return etag, cerr
	}
	if err != nil {
		return "", fmt.Errorf("manifest %s: lock: %w", r.prefix, err)
	}
	holder := "another loader"
	if b, err := readAll(ctx, r.st, held); err == nil {
		var lb lockBody
		switch {
		case json.Unmarshal(b, &lb) != nil:
		case lb.Owner == r.owner:
			// our own create landed and its answer was lost: the SDK's retry met the lock it made
			return held.ETag, nil
		case lb.Host != "":
			holder = fmt.Sprintf("loader pid %d on %s (since %s)", lb.PID, lb.Host, lb.Since.Format(time.RFC3339))
		}
	}
	r.o.Logger.Warn("manifest is locked; waiting to see whether its holder is alive", "url", loc.String(), "holder", holder, "wait", r.o.StaleAfter)
	poll := max(r.o.StaleAfter/10, 10*time.Millisecond)
	deadline := time.Now().Add(r.o.StaleAfter)
	t := time.NewTicker(poll)
	defer t.Stop()
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-t.C:
		}
		now, err := r.st.Stat(ctx, loc)
		if errors.Is(err, objstore.ErrNotFound) || err == nil && now.ETag != held.ETag {
			return "", fmt.Errorf("manifest %s: held by %s: %w", r.prefix, holder, manifest.ErrLocked)
		}
		if err != nil {
			return "", fmt.Errorf("manifest %s: lock: %w", r.prefix, err)
		}
	}
	etag, err := r.st.Update(ctx, loc, r.body(0, since), held.ETag)
	if errors.Is(err, objstore.ErrPrecondition) {
		return "", fmt.Errorf("manifest %s: %w", r.prefix, manifest.ErrLocked)
	}
	if err != nil {
		return "", fmt.Errorf("manifest %s: lock: %w", r.prefix, err)
	}
	r.o.Logger.Warn("took over a manifest lock whose holder showed no heartbeat", "url", loc.String(), "holder", holder, "after", r.o.StaleAfter)
	return etag, nil
}

// heartbeat rewrites the lock every Heartbeat until release. A lost If-Match means another loader
// took the lock: every later Append and Reset fails.
func (r *replica) heartbeat(loc objstore.Location, since time.Time) {
	defer r.stopped.Done()
	t := time.NewTicker(r.o.Heartbeat)
	defer t.Stop()
	for beat := int64(1); ; beat++ {
		select {
		case <-r.done:
			return
		case <-t.C:
		}
		r.mu.Lock()
		etag := r.lockETag
		r.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), max(r.o.Heartbeat, 10*time.Second))
		next, err := r.st.Update(ctx, loc, r.body(beat, since), etag)
		if err != nil {
			// The write's fate may be unknown (a timeout), or it landed and a retry lost the
			// condition: the lock is still ours if it names us.
			next, err = r.whose(ctx, loc)
		}
		cancel()
		r.mu.Lock()
		switch {
		case errors.Is(err, errLockLost), errors.Is(err, objstore.ErrNotFound):
			r.lost = fmt.Errorf("manifest %s: the lock was taken over by another loader: %w", r.prefix, manifest.ErrLocked)
		case err != nil:
			r.o.Logger.Warn("manifest lock heartbeat failed; retrying", "url", loc.String(), "err", err)
		default:
			r.lockETag = next
		}
		lost := r.lost != nil
		r.mu.Unlock()
		if lost {
			return
		}
	}
}

var errLockLost = errors.New("lock held by another owner")

// whose reads the lock and returns its ETag when it names this owner, errLockLost when it names
// another.
func (r *replica) whose(ctx context.Context, loc objstore.Location) (string, error) {
	o, err := r.st.Stat(ctx, loc)
	if err != nil {
		return "", err
	}
	b, err := readAll(ctx, r.st, o)
	if err != nil {
		return "", err
	}
	var lb lockBody
	if json.Unmarshal(b, &lb) != nil || lb.Owner != r.owner {
		return "", errLockLost
	}
	return o.ETag, nil
}

// release stops the heartbeat and deletes the lock if it is still ours.
func (r *replica) release() error {
	r.mu.Lock()
	if r.released {
		r.mu.Unlock()
		return nil
	}
	r.released = true
	r.mu.Unlock()
	close(r.done)
	r.stopped.Wait()
	if r.lostErr() != nil {
		return nil
	}
	loc := r.prefix.Child(r.prefix.Key + lockName)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if o, err := r.st.Stat(ctx, loc); err != nil || o.ETag != r.lockETag {
		return nil // not ours any more
	}
	if err := r.st.Delete(ctx, loc); err != nil {
		return fmt.Errorf("manifest %s: release lock: %w", r.prefix, err)
	}
	return nil
}

// List returns the names of the manifests under dir (those Open would open by name), in lexical
// order.
func List(ctx context.Context, st *objstore.Store, dir objstore.Location) ([]string, error) {
	base := dir.Key
	if base != "" && !strings.HasSuffix(base, "/") {
		base += "/"
	}
	var names []string
	err := st.Walk(ctx, dir.Child(base), func(sub string) bool {
		name := strings.TrimSuffix(strings.TrimPrefix(sub, base), "/")
		if name != "" && !strings.Contains(name, "/") {
			names = append(names, name)
		}
		return false
	}, func(objstore.Object) error { return nil })
	if err != nil && !errors.Is(err, objstore.ErrNotFound) {
		return nil, err
	}
	slices.Sort(names)
	return names, nil
}
