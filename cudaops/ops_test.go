package cudaops

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/device"
)

// TestOpCodesMatchTable checks the operation codes of the CUDA sources
// against device's op tables, which the Go side passes to the kernels:
// every op has its #define (OP_<NAME> for Binary, U_<NAME> for Unary) with
// the op's value, no code is left over, and the kernel's switch handles
// each one (a case, or the default's comment naming it). An op added to the
// table but not to the kernels, or a renumbered #define, fails here rather
// than on a GPU.
func TestOpCodesMatchTable(t *testing.T) {
	src, err := os.ReadFile("kernels/elementwise.cu")
	if err != nil {
		t.Fatal(err)
	}
	text := string(src)
	defines := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^#define ((?:OP|U)_[A-Z0-9_]+) (\d+)$`).FindAllStringSubmatch(text, -1) {
		v, _ := strconv.Atoi(m[2])
		defines[m[1]] = v
	}
	var want []string
	check := func(name string, value int) {
		t.Helper()
		want = append(want, name)
		got, ok := defines[name]
		switch {
		case !ok:
			t.Errorf("kernels/elementwise.cu has no #define %s (want %d)", name, value)
		case got != value:
			t.Errorf("kernels/elementwise.cu: #define %s %d, want %d", name, got, value)
		}
		if !regexp.MustCompile(`case ` + name + `:|default: // ` + name + `\b`).MatchString(text) {
			t.Errorf("kernels/elementwise.cu: no case handles %s", name)
		}
	}
	for op := range device.BinaryOp(device.NumBinaryOps) {
		check("OP_"+strings.ToUpper(op.String()), int(op))
	}
	for op := range device.UnaryOp(device.NumUnaryOps) {
		check("U_"+strings.ToUpper(op.String()), int(op))
	}
	if len(defines) != len(want) {
		for name, v := range defines {
			if !strings.Contains(" "+strings.Join(want, " ")+" ", " "+name+" ") {
				t.Errorf("kernels/elementwise.cu: #define %s %d names no op of device's tables", name, v)
			}
		}
	}
}
