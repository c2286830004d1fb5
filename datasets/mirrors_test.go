package datasets

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestDebianMirrors reads apt sources of both styles as a Debian 12
// machine may have them: options in brackets, comments, continuation
// lines, disabled stanzas, security and source archives, methods other
// than http, https and file, and files apt does not read.
func TestDebianMirrors(t *testing.T) {
	dir := t.TempDir()
	saved := aptDir
	aptDir = dir
	t.Cleanup(func() { aptDir = saved })
	t.Setenv(MirrorEnv, "")
	write := func(rel, s string) {
		p := filepath.Join(dir, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	if got, want := debianMirrors(), []string{DefaultDebianMirror}; !slices.Equal(got, want) {
		t.Errorf("without apt sources: %v, want %v", got, want)
	}

	write("sources.list", `# classic lines
deb http://ftp.example.org/debian/ bookworm main
deb-src http://src.example.org/debian bookworm main
deb [arch=amd64 signed-by=/usr/share/keyrings/k.gpg] https://opt.example.org/debian bookworm main # a comment
deb http://security.example.org/debian-security bookworm-security main
deb cdrom:[Debian 12]/ bookworm main
deb http://old.example.org/debian bullseye main
`)
	write("sources.list.d/b.sources", `Types: deb
URIs: http://deb.debian.org/debian
 http://two.example.org/debian
Suites: bookworm bookworm-updates
Components: main

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main

# a disabled stanza
Types: deb
URIs: http://disabled.example.org/debian
Suites: bookworm
Enabled: no

Types: deb-src
URIs: http://src2.example.org/debian
Suites: bookworm

types: deb deb-src
uris: mirror+http://list.example.org/mirrors.txt file:///srv/debian
suites: bookworm
`)
	write("sources.list.d/a.list", "deb http://a.example.org/debian bookworm main\n")
	write("sources.list.d/c.txt", "deb http://ignored.example.org/debian bookworm main\n")

	want := []string{
		"http://ftp.example.org/debian", "https://opt.example.org/debian",
		"http://a.example.org/debian",
		"http://deb.debian.org/debian", "http://two.example.org/debian", "file:///srv/debian",
	}
	if got := debianMirrors(); !slices.Equal(got, want) {
		t.Errorf("got  %v\nwant %v", got, want)
	}
	t.Setenv(MirrorEnv, "http://env.example.org/debian/")
	if got, want := debianMirrors(), []string{"http://env.example.org/debian"}; !slices.Equal(got, want) {
		t.Errorf("with $%s: %v, want %v", MirrorEnv, got, want)
	}
}
