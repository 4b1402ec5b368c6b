package ipcguard

import (
	"fmt"
	"strconv"
	"strings"
)

// VectorLenAt returns where the length of a vector of the flatbuffer b is stored, so tests can make
// it lie. path leads from the root table: each step but the last is "n" (the table in slot n) or
// "n[i]" (table i of the vector of tables in slot n); the last step is the vector's slot.
func VectorLenAt(b []byte, path ...string) (int, error) {
	t, err := newFbuf(b).root()
	if err != nil {
		return 0, err
	}
	for k, step := range path {
		name, index, indexed := strings.Cut(strings.TrimSuffix(step, "]"), "[")
		slot, err := strconv.Atoi(name)
		if err != nil {
			return 0, err
		}
		if k == len(path)-1 {
			at, err := t.field(slot)
			if err != nil || at == 0 {
				return 0, fmt.Errorf("no vector in slot %d (%w)", slot, err)
			}
			rel, err := t.f.u32(at)
			return at + rel, err
		}
		if !indexed {
			c, ok, err := t.child(slot)
			if err != nil || !ok {
				return 0, fmt.Errorf("no table in slot %d (%w)", slot, err)
			}
			t = c
			continue
		}
		i, err := strconv.Atoi(index)
		if err != nil {
			return 0, err
		}
		var found bool
		n := 0
		err = t.tables(slot, "test", func(c fbTable) error {
			if n == i {
				t, found = c, true
			}
			n++
			return nil
		})
		if err != nil || !found {
			return 0, fmt.Errorf("no table %d in slot %d (%w)", i, slot, err)
		}
	}
	return 0, fmt.Errorf("empty path")
}
