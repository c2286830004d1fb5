package device

import (
	"strings"
	"testing"
)

// withRegistry runs fn with the backend registry replaced by r, as in a
// program that links in only the backends of r.
func withRegistry(t *testing.T, r map[string]*backend, fn func()) {
	t.Helper()
	regMu.Lock()
	saved := registry
	registry = r
	regMu.Unlock()
	defer func() {
		regMu.Lock()
		registry = saved
		regMu.Unlock()
	}()
	fn()
}

func TestDefaultWithoutBackendNamesImport(t *testing.T) {
	withRegistry(t, map[string]*backend{}, func() {
		dev, err := Default()
		if err == nil {
			t.Fatalf("Default() with no backend linked = %v, want an error", dev)
		}
		for _, want := range []string{`"github.com/mixprec/mixprec/device/cpu"`, "import _", "linked: none"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Default() error %q does not say %s", err, want)
			}
		}
	})
}

func TestOpenUnlinkedBackend(t *testing.T) {
	fake := &backend{open: func() (Device, error) { return nil, nil }}
	withRegistry(t, map[string]*backend{"cpu": fake}, func() {
		_, err := Open("cuda")
		if err == nil || !strings.Contains(err.Error(), `import _ "github.com/mixprec/mixprec/cudaops"`) || !strings.Contains(err.Error(), "linked: cpu") {
			t.Errorf("Open(cuda) without cudaops linked: err = %v, want one naming the cudaops import and the linked cpu", err)
		}
		_, err = Open("tpu")
		if err == nil || !strings.Contains(err.Error(), `no backend "tpu"`) {
			t.Errorf("Open(tpu): err = %v, want no backend \"tpu\"", err)
		}
	})
}
