package delta

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
)

// File is a live data file of a table state.
type File struct {
	Path string // as written in the add action (a URI-encoded relative path)
	Size int64
	// NumRecords is the add's stats numRecords, or -1 when the add has no stats.
	NumRecords int64
}

// State is the replayed state of a table's log at one version. Make one with NewState (the zero
// value has no maps and cannot apply actions).
type State struct {
	Version  int64
	Protocol *Protocol
	MetaData *MetaData
	Txns     map[string]int64

	files []File // in the order their add actions were applied; removed entries have Path ""
	index map[string]int
	dead  int
	// NumRecords sums NumRecords of the live files that have stats.
	NumRecords int64
	// FilesWithoutStats counts live files whose NumRecords is unknown.
	FilesWithoutStats int
}

// NewState returns the empty state before version 0.
func NewState() *State {
	return &State{Version: -1, Txns: map[string]int64{}, index: map[string]int{}}
}

// Files returns the live files in the order they were added. The slice is the caller's.
func (s *State) Files() []File {
	out := make([]File, 0, len(s.files)-s.dead)
	for _, f := range s.files {
		if f.Path != "" {
			out = append(out, f)
		}
	}
	return out
}

// Apply applies the actions of version s.Version+1. The first version applied must hold protocol and
// metaData.
func (s *State) Apply(actions []Action) error {
	next := s.Version + 1
	if s.Protocol == nil || s.MetaData == nil {
		var p, m bool
		for i := range actions {
			p = p || actions[i].Protocol != nil
			m = m || actions[i].MetaData != nil
		}
		if (s.Protocol == nil && !p) || (s.MetaData == nil && !m) {
			return fmt.Errorf("%w: version %d: the log has no protocol or metaData action", ErrCorrupt, next)
		}
	}
	for i := range actions {
		a := &actions[i]
		switch {
		case a.Protocol != nil:
			p := *a.Protocol
			s.Protocol = &p
		case a.MetaData != nil:
			m := *a.MetaData
			s.MetaData = &m
		case a.Txn != nil:
			s.Txns[a.Txn.AppID] = a.Txn.Version
		case a.Add != nil:
			s.add(a.Add)
		case a.Remove != nil:
			s.remove(a.Remove.Path)
		}
	}
	s.Version = next
	if s.dead > 64 && s.dead > len(s.files)/2 {
		s.compact()
	}
	return nil
}

func (s *State) add(a *Add) {
	f := File{Path: a.Path, Size: a.Size, NumRecords: -1}
	if a.Stats != "" {
		var st struct {
			NumRecords *int64 `json:"numRecords"`
		}
		if json.Unmarshal([]byte(a.Stats), &st) == nil && st.NumRecords != nil && *st.NumRecords >= 0 {
			f.NumRecords = *st.NumRecords
		}
	}
	s.remove(a.Path) // a later add of the same path replaces the earlier one
	s.index[f.Path] = len(s.files)
	s.files = append(s.files, f)
	s.count(f, 1)
}

func (s *State) remove(path string) {
	i, ok := s.index[path]
	if !ok {
		return
	}
	s.count(s.files[i], -1)
	delete(s.index, path)
	s.files[i] = File{}
	s.dead++
}

func (s *State) count(f File, sign int64) {
	if f.NumRecords < 0 {
		s.FilesWithoutStats += int(sign)
		return
	}
	s.NumRecords += sign * f.NumRecords
}

func (s *State) compact() {
	live := s.Files()
	s.files = live
	s.dead = 0
	clear(s.index)
	for i, f := range live {
		s.index[f.Path] = i
	}
}

// Update reads the versions after s.Version from logDir and applies them, stopping at the first
// version that does not exist. It returns how many versions it applied. On error s is unchanged up
// to the last version applied successfully.
func (s *State) Update(logDir string) (int, error) {
	if err := CheckNoCheckpoint(logDir); err != nil {
		return 0, err
	}
	n := 0
	for {
		actions, err := ReadVersion(logDir, s.Version+1)
		if errors.Is(err, fs.ErrNotExist) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		if err := s.Apply(actions); err != nil {
			return n, err
		}
		n++
	}
}
