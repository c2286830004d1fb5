package asmcheck

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// vectorReg matches an X, Y or Z register operand.
var vectorReg = regexp.MustCompile(`\b[XYZ]([0-9]|[12][0-9]|3[01])\b`)

// legacy returns the legacy-SSE instructions in src, an assembly file's
// text: lines whose mnemonic names a vector register but is neither a VEX
// or EVEX form (V...) nor a mask-register instruction (K...).
func legacy(src string) []string {
	var bad []string
	sc := bufio.NewScanner(strings.NewReader(src))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || strings.HasSuffix(line, ":") {
			continue
		}
		f := strings.Fields(line)
		op := f[0]
		if strings.Contains(op, "(") || op != strings.ToUpper(op) {
			continue // a macro call (its body is checked where it is defined) or a macro parameter
		}
		if strings.HasPrefix(op, "V") || strings.HasPrefix(op, "K") || op == "TEXT" || op == "DATA" || op == "GLOBL" {
			continue
		}
		if vectorReg.MatchString(strings.Join(f[1:], " ")) {
			bad = append(bad, strings.TrimSpace(sc.Text()))
		}
	}
	return bad
}

func TestLegacyDetector(t *testing.T) {
	src := "TEXT ·f(SB), NOSPLIT, $0-8\n\tMOVQ AX, X8 // bad\n\tVMOVQ AX, X9\n\tPINSRQ $1, BX, X2\n\tKMOVW AX, K1\n\tMOVQ AX, BX\n\t// MOVQ AX, X3 in a comment\n"
	got := legacy(src)
	if len(got) != 2 || !strings.HasPrefix(got[0], "MOVQ AX, X8") || !strings.HasPrefix(got[1], "PINSRQ") {
		t.Fatalf("legacy found %q, want the MOVQ and the PINSRQ", got)
	}
}

// TestNoLegacySSE walks the module's .s files.
func TestNoLegacySSE(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "data" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_amd64.s") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		rel, _ := filepath.Rel(root, path)
		for _, l := range legacy(string(b)) {
			t.Errorf("%s: legacy-SSE instruction in AVX code: %s (use its V form)", rel, l)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 5 {
		t.Fatalf("found %d amd64 assembly files under %s; the walk is broken", files, root)
	}
}
