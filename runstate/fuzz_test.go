package runstate

import (
	"crypto/sha256"
	"encoding/hex"
	"reflect"
	"testing"
)

// FuzzUnseal feeds state.json bodies of any bytes, sealed with their true
// SHA-256 so that the strict decoder behind the checksum is what runs:
// unseal must never panic, and a state it accepts must seal and unseal
// back to itself.
func FuzzUnseal(f *testing.F) {
	js, err := seal(state{Format: format})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(js[:len(js)-sumLineLen])
	f.Add([]byte(`{"format": "` + format + `", "x": 1`))
	f.Add([]byte(`{"format": "` + format + `", "format": "` + format + `"`))
	f.Fuzz(func(t *testing.T, body []byte) {
		sum := sha256.Sum256(body)
		st, err := unseal(append(body, sumLine(hex.EncodeToString(sum[:]))...))
		if err != nil {
			return
		}
		again, err := seal(st)
		if err != nil {
			t.Fatalf("an accepted state does not seal: %v", err)
		}
		back, err := unseal(again)
		if err != nil {
			t.Fatalf("an accepted state, sealed again, is refused: %v", err)
		}
		if !reflect.DeepEqual(back, st) {
			t.Fatalf("an accepted state changes when sealed and read again:\n%+v\n%+v", st, back)
		}
	})
}
