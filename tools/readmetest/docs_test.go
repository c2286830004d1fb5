package readmetest

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// maxReadmeLines is how long the README may be: a front door, not the
// manual (docs/ holds the rest).
const maxReadmeLines = 250

// repoRoot is the repository's root, from this package's directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// ignoredTop returns the root-anchored entries of .gitignore ("/data/" is
// data): folders that builds and downloads make, which docs may mention
// but a checkout does not hold.
func ignoredTop(t *testing.T, root string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, ".gitignore"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "/") {
			out[strings.Trim(line, "/")] = true
		}
	}
	return out
}

// markdownFiles returns the repository's Markdown files, relative to root,
// outside hidden and ignored folders.
func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	ignored := ignoredTop(t, root)
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() && rel != "." && (strings.HasPrefix(d.Name(), ".") || ignored[filepath.ToSlash(rel)]) {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// A doc is a Markdown file split into what the checks read: its headings,
// and its text outside fenced code blocks with the line of each line.
type doc struct {
	path     string // relative to the root
	headings []string
	prose    []proseLine
}

type proseLine struct {
	n    int
	text string
}

func readDoc(t *testing.T, root, rel string) doc {
	t.Helper()
	f, err := os.Open(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := doc{path: rel}
	sc := bufio.NewScanner(f)
	fence := ""
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		if strings.HasPrefix(line, "    ") || strings.HasPrefix(line, "\t") {
			continue // an indented code block (or a list item's continuation, which holds no heading)
		}
		if m := regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*$`).FindStringSubmatch(line); m != nil {
			d.headings = append(d.headings, m[1])
		}
		d.prose = append(d.prose, proseLine{n, line})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return d
}

// anchors returns the fragment GitHub gives each heading: lower case, with
// everything but letters, digits, spaces, hyphens and underscores dropped,
// spaces made hyphens, and -1, -2, ... after repeats.
func anchors(headings []string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, h := range headings {
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

var (
	codeSpan = regexp.MustCompile("`[^`]+`")
	mdLink   = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
)

// TestDocsLinks requires every relative link in the repository's Markdown
// to name a file or folder of the checkout, and every fragment (#...) a
// heading of the Markdown file it points into.
func TestDocsLinks(t *testing.T) {
	root := repoRoot(t)
	files := markdownFiles(t, root)
	if !slices.Contains(files, "README.md") || !slices.ContainsFunc(files, func(f string) bool { return strings.HasPrefix(f, "docs/") }) {
		t.Fatalf("found Markdown files %v; want README.md and docs/", files)
	}
	docs := map[string]doc{}
	for _, f := range files {
		docs[f] = readDoc(t, root, f)
	}
	checked := 0
	for _, f := range files {
		for _, l := range docs[f].prose {
			text := codeSpan.ReplaceAllString(l.text, "")
			for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				file, frag, _ := strings.Cut(target, "#")
				rel := f // a bare #fragment points into this file
				if file != "" {
					rel = filepath.ToSlash(filepath.Join(filepath.Dir(f), file))
					if rel == ".." || strings.HasPrefix(rel, "../") {
						t.Errorf("%s:%d: link %q leaves the repository", f, l.n, target)
						continue
					}
					if _, err := os.Stat(filepath.Join(root, rel)); err != nil {
						t.Errorf("%s:%d: link %q: no %s in the repository", f, l.n, target, rel)
						continue
					}
				}
				if frag == "" {
					continue
				}
				d, ok := docs[rel]
				if !ok {
					t.Errorf("%s:%d: link %q has a fragment, but %s is not a Markdown file of the repository", f, l.n, target, rel)
					continue
				}
				if !anchors(d.headings)[frag] {
					t.Errorf("%s:%d: link %q: %s has no heading #%s", f, l.n, target, rel, frag)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative links found: the link parser is broken")
	}
}

// TestDocsPaths requires every repository path the Markdown cites in
// backticks to exist: a word with a slash whose first element is a file or
// folder at the root (`nn/models`, `tools/reference/torch_reference.py`,
// `./examples/mnist` in a command), globs matching at least one file.
// Paths under folders that builds make (data/, bin/) are not checked.
func TestDocsPaths(t *testing.T) {
	root := repoRoot(t)
	ignored := ignoredTop(t, root)
	top := map[string]bool{}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") && !ignored[e.Name()] {
			top[e.Name()] = true
		}
	}
	checked := 0
	for _, f := range markdownFiles(t, root) {
		for _, l := range readDoc(t, root, f).prose {
			for _, span := range codeSpan.FindAllString(l.text, -1) {
				for _, word := range strings.Fields(strings.Trim(span, "`")) {
					word = strings.Trim(word, `'"(),;:`)
					if strings.HasPrefix(word, "../") {
						t.Errorf("%s:%d: `%s` cites a path outside the repository (cited paths are from its root)", f, l.n, word)
						continue
					}
					p := strings.TrimPrefix(word, "./")
					first, _, ok := strings.Cut(p, "/")
					if !ok || !top[first] || strings.ContainsAny(p, "$<>{}|=") || strings.Contains(p, "...") {
						continue
					}
					checked++
					matches, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(strings.TrimSuffix(p, "/"))))
					if err != nil || len(matches) == 0 {
						t.Errorf("%s:%d: `%s` cites %s, which is not in the repository", f, l.n, word, p)
					}
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no cited paths found: the path finder is broken")
	}
}

// TestReadmeLength holds the README to a front door's length.
func TestReadmeLength(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > maxReadmeLines {
		t.Errorf("README.md has %d lines, want at most %d: move the detail to docs/ or to package documentation", n, maxReadmeLines)
	}
}

// TestLongTestsInMakefile requires every test that runs only under
// MIXPREC_LONG=1 to be named in the Makefile, whose test-long targets are
// the only place it runs, so that a gated test cannot drop out of CI.
func TestLongTestsInMakefile(t *testing.T) {
	root := repoRoot(t)
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{} // test name -> file
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") || path == filepath.Join(root, "tools", "readmetest", "docs_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil || !strings.Contains(string(src), "MIXPREC_LONG") {
			return err
		}
		fset := token.NewFileSet()
		file, err := parser.ParseFile(fset, path, src, 0)
		if err != nil {
			return err
		}
		for _, decl := range file.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			body := string(src[fset.Position(fn.Body.Pos()).Offset:fset.Position(fn.Body.End()).Offset])
			if strings.Contains(body, `"MIXPREC_LONG"`) {
				rel, _ := filepath.Rel(root, path)
				names[fn.Name.Name] = rel
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		t.Fatal("found no test gated on MIXPREC_LONG; the search is broken, or the Makefile's test-long targets are stale")
	}
	for name, file := range names {
		if !strings.HasPrefix(name, "Test") {
			t.Errorf("%s: %s reads MIXPREC_LONG but is not a test; gate the test itself", file, name)
			continue
		}
		if !regexp.MustCompile(`\b` + name + `\b`).Match(mk) {
			t.Errorf("%s: %s runs only under MIXPREC_LONG=1, but the Makefile's test-long targets do not name it", file, name)
		}
	}
}
