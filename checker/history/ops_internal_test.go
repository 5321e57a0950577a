package history

import (
	"reflect"
	"testing"
)

// TestRecIsCompact holds the stored operation to the size and the pointer-free layout its
// comment promises: the history's memory, and the collector's work on it, depend on both.
func TestRecIsCompact(t *testing.T) {
	typ := reflect.TypeFor[rec]()
	if typ.Size() > 80 {
		t.Errorf("rec is %d bytes, want at most 80", typ.Size())
	}
	for f := range typ.Fields() {
		if hasPointers(f.Type) {
			t.Errorf("rec.%s (%s) holds pointers", f.Name, f.Type)
		}
	}
}

func hasPointers(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Struct:
		for f := range t.Fields() {
			if hasPointers(f.Type) {
				return true
			}
		}
		return false
	case reflect.Array:
		return hasPointers(t.Elem())
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return false
	}
	return true
}
