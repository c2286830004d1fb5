package cli

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestProfileFlagValues checks -trace and -metrics: a file in an existing
// directory is taken; a missing directory, a directory, or an empty name
// is refused with a reason, and the same file for both is refused by
// Check.
func TestProfileFlagValues(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "exists.json")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string // "" when accepted
	}{
		{[]string{"-trace", filepath.Join(dir, "t.json")}, ""},
		{[]string{"-trace", file}, ""}, // replaced at the end of a run that succeeds
		{[]string{"-metrics", "relative.jsonl"}, ""},
		{[]string{"-trace", filepath.Join(dir, "no", "t.json")}, "no directory"},
		{[]string{"-metrics", dir}, "is a directory"},
		{[]string{"-metrics", ""}, "want a file name"},
		{[]string{"-tensorboard", filepath.Join(dir, "runs")}, ""}, // made when the run starts
		{[]string{"-tensorboard", dir}, ""},
		{[]string{"-tensorboard", file}, "is a file"},
		{[]string{"-tensorboard", filepath.Join(dir, "no", "runs")}, ""},
		{[]string{"-tensorboard", filepath.Join(file, "runs")}, "is a file"},
	} {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var p ProfileFlags
		p.Register(fs)
		err := fs.Parse(c.args)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: %v", c.args, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v: error %v, want one saying %q", c.args, err, c.want)
		}
	}
	same := ProfileFlags{Trace: "a.json", Metrics: "./a.json"}
	if err := same.Check(); err == nil || !strings.Contains(err.Error(), "same file") {
		t.Errorf("one file for both: Check() = %v, want a usage error", err)
	}
	if err := (ProfileFlags{Trace: "a.json", Metrics: "b.json"}).Check(); err != nil {
		t.Errorf("two files: Check() = %v", err)
	}
	for _, c := range []struct {
		p  ProfileFlags
		on bool
	}{{ProfileFlags{}, false}, {ProfileFlags{Metrics: "m"}, false}, {ProfileFlags{Profile: true}, true}, {ProfileFlags{Trace: "t"}, true}} {
		if c.p.On() != c.on {
			t.Errorf("%+v.On() = %v, want %v", c.p, !c.on, c.on)
		}
	}
	for _, c := range []struct {
		p   ProfileFlags
		any bool
	}{{ProfileFlags{}, false}, {ProfileFlags{Metrics: "m"}, true}, {ProfileFlags{TensorBoard: "d"}, true}, {ProfileFlags{Profile: true}, true}} {
		if c.p.Any() != c.any {
			t.Errorf("%+v.Any() = %v, want %v", c.p, !c.any, c.any)
		}
	}
}
