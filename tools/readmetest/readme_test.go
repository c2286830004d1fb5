package readmetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// firstGoBlock returns the first fenced Go block of a Markdown text.
func firstGoBlock(md string) string {
	m := regexp.MustCompile("(?s)```go\n(.*?)```\n").FindStringSubmatch(md)
	if m == nil {
		return ""
	}
	return m[1]
}

func TestReadmeScript(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	src := firstGoBlock(string(md))
	if !strings.Contains(src, "package main") {
		t.Fatalf("README.md's first Go block is not a package main program:\n%s", src)
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the README's program: %v", err)
	}
	mod := t.TempDir()
	gomod := "module readme\n\ngo 1.26.0\n\nrequire github.com/mixprec/mixprec v0.0.0\n\nreplace github.com/mixprec/mixprec => " + root + "\n"
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"go.mod": []byte(gomod), "go.sum": sum, "main.go": []byte(src)} {
		if err := os.WriteFile(filepath.Join(mod, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(mod, "readme")
	for _, args := range [][]string{{"vet", "."}, {"build", "-o", bin, "."}} {
		cmd := exec.Command(goCmd, args...)
		cmd.Dir = mod
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s of the README's program, as a module of its own: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if testing.Short() {
		t.Skip("built and vetted; running three epochs is skipped under -short")
	}
	// Run it where the repository's copy of MNIST is, from outside the
	// repository, as a user's program runs.
	data := os.Getenv("MIXPREC_DATA")
	if data == "" {
		data = filepath.Join(root, "data")
	}
	if _, err := os.Stat(filepath.Join(data, "mnist")); err != nil {
		t.Skipf("built and vetted; not run: no MNIST in %s (make data fetches it)", data)
	}
	cmd := exec.Command(bin)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "MIXPREC_DATA="+data)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the README's program failed: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`epoch 3: loss [0-9.]+, test accuracy (0\.9[5-9][0-9]*)`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("the README's program did not reach 95%% test accuracy in three epochs:\n%s", out)
	}
	t.Logf("README program: test accuracy %s after three epochs", m[1])
}
