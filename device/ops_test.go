package device

import (
	"fmt"
	"math"
	"testing"
)

// TestOpTables checks that every op has a complete row: a name used once,
// which String returns; its Go function(s) and CUDA text; a gradient rule
// and its CUDA text (unary ops); an autocast class; and an input domain. A
// constant added without its row, or a row missing a part, fails here.
func TestOpTables(t *testing.T) {
	names := map[string]bool{}
	check := func(op fmt.Stringer, kind, name string, missing []string, domains []Domain) {
		t.Helper()
		id := fmt.Sprintf("%s %q", kind, name)
		if name == "" {
			t.Errorf("%s %d: no name", kind, op)
		}
		if names[kind+" "+name] {
			t.Errorf("%s: name used twice", id)
		}
		names[kind+" "+name] = true
		if got := op.String(); got != name {
			t.Errorf("%s: String() = %q", id, got)
		}
		for _, m := range missing {
			t.Errorf("%s: its row has no %s", id, m)
		}
		for _, d := range domains {
			if !(d.Lo < d.Hi) || (d.BHi != 0 && !(d.BLo < d.BHi)) {
				t.Errorf("%s: domain %+v is empty", id, d)
			}
		}
	}
	for op := range BinaryOp(NumBinaryOps) {
		d := op.Def()
		check(op, "BinaryOp", d.Name, missing(map[string]bool{
			"F32": d.F32 != nil, "CUDA": d.CUDA != "", "Class": d.Class != CastUnset, "Domains": len(d.Domains) > 0,
		}), d.Domains)
	}
	for op := range UnaryOp(NumUnaryOps) {
		d := op.Def()
		check(op, "UnaryOp", d.Name, missing(map[string]bool{
			"F32 or F64": d.F32 != nil || d.F64 != nil, "CUDA": d.CUDA != "", "Grad": d.Grad != nil,
			"CUDAGrad": d.CUDAGrad != "", "Class": d.Class != CastUnset, "Domains": len(d.Domains) > 0,
			"valid Keep": d.Keep <= KeepOutput,
		}), d.Domains)
	}
	if got := UnaryOp(NumUnaryOps).String(); got != fmt.Sprintf("UnaryOp(%d)", NumUnaryOps) {
		t.Errorf("String of an op outside the table = %q", got)
	}
}

// missing lists the parts of has that are false, in a fixed order.
func missing(has map[string]bool) []string {
	var out []string
	for _, k := range []string{"F32", "F32 or F64", "CUDA", "Grad", "CUDAGrad", "Class", "Domains", "valid Keep"} {
		if v, ok := has[k]; ok && !v {
			out = append(out, k)
		}
	}
	return out
}

// TestGradReadsWhatItKeeps checks that the gradient rule of an op that
// keeps nothing does not read in, which a backend does not pass it.
func TestGradReadsWhatItKeeps(t *testing.T) {
	for op := range UnaryOp(NumUnaryOps) {
		d := op.Def()
		if d.Keep != KeepNothing {
			continue
		}
		for _, dy := range []float32{-1.5, 0, 2} {
			a, b := d.Grad(dy, 0, 0.75), d.Grad(dy, float32(math.NaN()), 0.75)
			if a != b {
				t.Errorf("%v keeps nothing, but its gradient of dy %v reads in: %v with in 0, %v with NaN", op, dy, a, b)
			}
		}
	}
}

// TestEval checks that Eval is F32 where a row has it and F64 rounded once
// otherwise.
func TestEval(t *testing.T) {
	if got := Square.Def().Eval(3, 0); got != 9 {
		t.Errorf("square(3) = %v, want 9", got)
	}
	if got, want := Exp.Def().Eval(1, 0), float32(math.E); got != want {
		t.Errorf("exp(1) = %v, want %v", got, want)
	}
}
