//go:build !purego

package gemm

import (
	"bufio"
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// byteLine matches a line of kernel_amd64.s or conv_amd64.s that carries an instruction Go's
// assembler has no mnemonic for: BYTE directives, then the instruction in
// Intel syntax as a comment.
var byteLine = regexp.MustCompile(`^\s*((?:BYTE \$0x[0-9a-f]{2}(?:; )?)+)\s*// (.+)$`)

// TestByteEncodings assembles the comment of every BYTE line in
// kernel_amd64.s and conv_amd64.s with GNU as and checks that it gives the line's bytes:
// the VDPBF16PS and AMX encodings gen.go derives by hand.
func TestByteEncodings(t *testing.T) {
	as, err := exec.LookPath("as")
	if err != nil {
		t.Skip("GNU as is not installed (Debian's binutils)")
	}
	var src []byte
	for _, f := range []string{"kernel_amd64.s", "conv_amd64.s"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src = append(src, b...)
	}
	type insn struct {
		code  []byte
		intel string
	}
	var list []insn
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(src))
	for sc.Scan() {
		m := byteLine.FindStringSubmatch(sc.Text())
		if m == nil || seen[m[2]] {
			continue
		}
		seen[m[2]] = true
		var code []byte
		for _, f := range strings.Split(m[1], ";") {
			f = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(f), "BYTE $0x"))
			if f == "" {
				continue
			}
			v, err := strconv.ParseUint(f, 16, 8)
			if err != nil {
				t.Fatalf("bad byte %q in %q", f, sc.Text())
			}
			code = append(code, byte(v))
		}
		list = append(list, insn{code, m[2]})
	}
	if len(list) < 10 {
		t.Fatalf("found %d distinct BYTE-encoded instructions in kernel_amd64.s and conv_amd64.s; the pattern is broken", len(list))
	}
	dir := t.TempDir()
	// One instruction per section, so that each is compared on its own.
	var asm strings.Builder
	asm.WriteString(".intel_syntax noprefix\n")
	for i, in := range list {
		asm.WriteString(".section .text." + strconv.Itoa(i) + ",\"ax\"\n" + in.intel + "\n")
	}
	if err := os.WriteFile(filepath.Join(dir, "x.s"), []byte(asm.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	obj := filepath.Join(dir, "x.o")
	if out, err := exec.Command(as, "--64", "-o", obj, filepath.Join(dir, "x.s")).CombinedOutput(); err != nil {
		t.Fatalf("as: %v\n%s", err, out)
	}
	f, err := elf.Open(obj)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i, in := range list {
		s := f.Section(".text." + strconv.Itoa(i))
		if s == nil {
			t.Fatalf("no section for %q", in.intel)
		}
		got, err := s.Data()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, in.code) {
			t.Errorf("%s: kernel_amd64.s has % x, GNU as gives % x", in.intel, in.code, got)
		}
	}
	t.Logf("%d distinct instructions checked", len(list))
}
