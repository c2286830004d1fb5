//go:build ignore

// bnact_gen writes bnact_amd64.s: batch norm's AVX-512 loops with the
// residual add and ReLU fused in (bnact.go), and the add of the residual
// gradients (Axpby's alpha = beta = 1), each in two variants, for
// float32, bfloat16 and binary16 storage (16 bits widened as they are
// loaded and rounded to nearest even as they are stored). The variants
// differ only in their loads and stores, so they are generated from one
// template each.
//
// Run it with `go generate` in this directory.
package main

import (
	"bytes"
	"fmt"
	"log"
	"os"
)

// storage is one element type the loops read and write.
type storage struct {
	suffix string
	size   int // bytes an element
}

var (
	f32  = storage{"F32", 4}
	bf16 = storage{"BF16", 2}
	f16  = storage{"F16", 2}
)

type gen struct {
	w bytes.Buffer
	s storage
}

func (g *gen) p(format string, args ...any) { fmt.Fprintf(&g.w, format+"\n", args...) }

// load puts 16 elements at ptr into z as float32, masked by k ("" for
// none).
func (g *gen) load(ptr, z, k string) {
	mask := ""
	suf := ""
	if k != "" {
		mask, suf = k+", ", ".Z"
	}
	switch g.s {
	case f32:
		g.p("\tVMOVUPS%s (%s), %s%s", suf, ptr, mask, z)
		return
	case f16:
		g.p("\tVCVTPH2PS%s (%s), %s%s", suf, ptr, mask, z) // exact
		return
	}
	g.p("\tVPMOVZXWD%s (%s), %s%s", suf, ptr, mask, z)
	g.p("\tVPSLLD $16, %s, %s", z, z)
}

// store writes the 16 float32 lanes of z to ptr, rounded to the storage
// type, masked by k ("" for none); t1, t2, t3 are scratch registers.
func (g *gen) store(z, ptr, k, t1, t2, t3 string) {
	mask := ""
	if k != "" {
		mask = k + ", "
	}
	switch g.s {
	case f32:
		g.p("\tVMOVUPS %s, %s(%s)", z, mask, ptr)
		return
	case f16:
		// Round to nearest even whatever MXCSR says (imm8 0), as
		// dtype's F16 encoding does.
		g.p("\tVCVTPS2PH $0, %s, %s(%s)", z, mask, ptr)
		return
	}
	// dtype's F32ToBF16: add 0x7fff plus the lowest kept bit and keep the
	// top half, except that a NaN keeps its top half with the quiet bit
	// set. Constants: Z26 = 1, Z27 = 0x7fff, Z28 = 0x40, Z29 =
	// 0x7fffffff, Z23 = 0x7f800000.
	g.p("\tVPSRLD $16, %s, %s", z, t1)
	g.p("\tVPANDD Z26, %s, %s", t1, t1)
	g.p("\tVPADDD Z27, %s, %s", t1, t1)
	g.p("\tVPADDD %s, %s, %s", t1, z, t2)
	g.p("\tVPSRLD $16, %s, %s", t2, t2)
	g.p("\tVPANDD Z29, %s, %s", z, t3)
	g.p("\tVPCMPGTD Z23, %s, K7", t3)
	g.p("\tVPSRLD $16, %s, %s", z, t3)
	g.p("\tVPORD Z28, %s, %s", t3, t3)
	g.p("\tVMOVDQA32 %s, K7, %s", t3, t2)
	g.p("\tVPMOVDW %s, %s(%s)", t2, mask, ptr)
}

// consts loads the constants: Z23 0x7f800000, Z24 zero, Z25 0x7fffffff,
// Z22 0x80000000, and the rounding's Z26-Z29.
func (g *gen) consts() {
	for _, c := range []struct {
		v string
		z int
	}{{"$0x7f800000", 23}, {"$0x7fffffff", 25}, {"$0x80000000", 22}, {"$1", 26}, {"$0x7fff", 27}, {"$0x40", 28}, {"$0x7fffffff", 29}} {
		g.p("\tMOVL %s, AX", c.v)
		g.p("\tVPBROADCASTD AX, Z%d", c.z)
	}
	g.p("\tVPXORD Z24, Z24, Z24")
}

// tail sets K1 to the last n%16 elements of n (in CX) and CX to the whole
// steps, and K5 to K1's upper eight.
func (g *gen) tail() {
	g.p("\tMOVQ CX, R11")
	g.p("\tANDQ $15, R11")
	g.p("\tMOVQ $-1, R12")
	g.p("\tBZHIQ R11, R12, R12")
	g.p("\tKMOVW R12, K1")
	g.p("\tKSHIFTRW $8, K1, K5")
	g.p("\tSHRQ $4, CX")
}

// genAct writes bnAct<S>(dst, x, res, n, scale, shift, flags): dst =
// x*scale + shift, plus res when flags&1, through ReLU when flags&2, as
// the Go loop bnActGo computes it.
func (g *gen) genAct() {
	name := "bnAct" + g.s.suffix
	g.p("")
	g.p("// func %s(dst, x, res unsafe.Pointer, n int, scale, shift float32, flags int)", name)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-48", name)
	g.p("\tMOVQ dst+0(FP), DI")
	g.p("\tMOVQ x+8(FP), SI")
	g.p("\tMOVQ res+16(FP), DX")
	g.p("\tMOVQ n+24(FP), CX")
	g.p("\tVBROADCASTSS scale+32(FP), Z20")
	g.p("\tVBROADCASTSS shift+36(FP), Z21")
	g.p("\tMOVQ flags+40(FP), R8")
	g.consts()
	g.tail()
	body := func(k, label string) {
		g.load("SI", "Z0", k)
		g.p("\tVMULPS Z20, Z0, Z0")
		g.p("\tVADDPS Z21, Z0, Z0")
		g.p("\tTESTQ $1, R8")
		g.p("\tJZ %s_nores%s", name, label)
		g.load("DX", "Z1", k)
		g.p("\tVADDPS Z1, Z0, Z0")
		g.p("%s_nores%s:", name, label)
		g.p("\tTESTQ $2, R8")
		g.p("\tJZ %s_norelu%s", name, label)
		// relu: lanes whose bits with the sign flipped are at most +Inf's
		// (negative numbers and -0) become +0; NaNs stay.
		g.p("\tVPXORD Z22, Z0, Z2")
		g.p("\tVPCMPUD $2, Z23, Z2, K2")
		g.p("\tVMOVDQA32 Z24, K2, Z0")
		g.p("%s_norelu%s:", name, label)
		g.store("Z0", "DI", k, "Z3", "Z4", "Z5")
	}
	g.p("\tTESTQ CX, CX")
	g.p("\tJZ %s_tail", name)
	g.p("%s_step:", name)
	body("", "")
	g.p("\tADDQ $%d, SI", 16*g.s.size)
	g.p("\tADDQ $%d, DX", 16*g.s.size)
	g.p("\tADDQ $%d, DI", 16*g.s.size)
	g.p("\tDECQ CX")
	g.p("\tJNZ %s_step", name)
	g.p("%s_tail:", name)
	body("K1", "t")
	g.p("\tVZEROUPPER")
	g.p("\tRET")
}

// gradIn loads dz into Z16 (dy, zeroed where ReLU's gradient is 0 when
// flags&2) and x into Z18, masked by k, and stores dz to dres (R9) when
// flags&1.
func (g *gen) gradIn(name, k, label string, storeRes bool) {
	g.load("SI", "Z16", k)
	g.p("\tTESTQ $2, R8")
	g.p("\tJZ %s_norelu%s", name, label)
	// ReLU's gradient passes dy where y > 0 or y is a NaN (reluGradMask).
	g.load("BX", "Z17", k)
	g.p("\tVPCMPGTD Z24, Z17, K2")
	g.p("\tVPANDD Z25, Z17, Z19")
	g.p("\tVPCMPGTD Z23, Z19, K3")
	g.p("\tKORW K2, K3, K2")
	g.p("\tVMOVDQA32.Z Z16, K2, Z16")
	g.p("%s_norelu%s:", name, label)
	if storeRes {
		g.p("\tTESTQ $1, R8")
		g.p("\tJZ %s_nores%s", name, label)
		g.store("Z16", "R9", k, "Z19", "Z20", "Z21")
		g.p("%s_nores%s:", name, label)
	}
	g.load("DX", "Z18", k)
}

// advance moves the four pointers a step on.
func (g *gen) advance(regs ...string) {
	for _, r := range regs {
		g.p("\tADDQ $%d, %s", 16*g.s.size, r)
	}
}

// genGradSums writes bnActGradSums<S>(dres, dy, y, x, n, mu, is, flags):
// the sums of bnGradSums over dz (dy through ReLU's gradient when flags&2),
// storing dz to dres when flags&1, as bnActGradSumsGo does.
func (g *gen) genGradSums() {
	name := "bnActGradSums" + g.s.suffix
	g.p("")
	g.p("// func %s(dres, dy, y, x unsafe.Pointer, n int, mu, is float64, flags int) (sdy, sdyx float64)", name)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-80", name)
	g.p("\tMOVQ dres+0(FP), R9")
	g.p("\tMOVQ dy+8(FP), SI")
	g.p("\tMOVQ y+16(FP), BX")
	g.p("\tMOVQ x+24(FP), DX")
	g.p("\tMOVQ n+32(FP), CX")
	g.p("\tVBROADCASTSD mu+40(FP), Z8")
	g.p("\tVBROADCASTSD is+48(FP), Z9")
	g.p("\tMOVQ flags+56(FP), R8")
	g.consts()
	for z := 0; z < 4; z++ {
		g.p("\tVPXORQ Z%d, Z%d, Z%d", z, z, z)
	}
	g.p("\tKXNORW K4, K4, K4")
	g.tail()
	// BNSUMS of normsimd_amd64.s: Z0, Z1 += float64(dz); Z2, Z3 +=
	// (dz*(x-mu))*is, under masks for the two halves.
	sums := func(ml, mh string) {
		g.p("\tVCVTPS2PD Y16, Z4")
		g.p("\tVEXTRACTF32X8 $1, Z16, Y19")
		g.p("\tVCVTPS2PD Y19, Z5")
		g.p("\tVCVTPS2PD Y18, Z6")
		g.p("\tVEXTRACTF32X8 $1, Z18, Y19")
		g.p("\tVCVTPS2PD Y19, Z7")
		g.p("\tVADDPD Z4, Z0, %s, Z0", ml)
		g.p("\tVADDPD Z5, Z1, %s, Z1", mh)
		g.p("\tVSUBPD Z8, Z6, Z6")
		g.p("\tVSUBPD Z8, Z7, Z7")
		g.p("\tVMULPD Z6, Z4, Z6")
		g.p("\tVMULPD Z7, Z5, Z7")
		g.p("\tVMULPD Z9, Z6, Z6")
		g.p("\tVMULPD Z9, Z7, Z7")
		g.p("\tVADDPD Z6, Z2, %s, Z2", ml)
		g.p("\tVADDPD Z7, Z3, %s, Z3", mh)
	}
	g.p("\tTESTQ CX, CX")
	g.p("\tJZ %s_tail", name)
	g.p("%s_step:", name)
	g.gradIn(name, "", "", true)
	sums("K4", "K4")
	g.advance("SI", "BX", "DX", "R9")
	g.p("\tDECQ CX")
	g.p("\tJNZ %s_step", name)
	g.p("%s_tail:", name)
	g.gradIn(name, "K1", "t", true)
	sums("K1", "K5")
	// LANESUM16 of normsimd_amd64.s, for each pair of accumulators.
	laneSum := func() {
		g.p("\tVADDPD Z1, Z0, Z0")
		g.p("\tVEXTRACTF64X4 $1, Z0, Y1")
		g.p("\tVADDPD Y1, Y0, Y0")
		g.p("\tVEXTRACTF128 $1, Y0, X1")
		g.p("\tVADDPD X1, X0, X0")
		g.p("\tVPERMILPD $1, X0, X1")
		g.p("\tVADDSD X1, X0, X0")
	}
	laneSum()
	g.p("\tVMOVSD X0, sdy+64(FP)")
	g.p("\tVMOVAPD Z2, Z0")
	g.p("\tVMOVAPD Z3, Z1")
	laneSum()
	g.p("\tVMOVSD X0, sdyx+72(FP)")
	g.p("\tVZEROUPPER")
	g.p("\tRET")
}

// genGradOut writes bnActGradOut<S>(dst, dy, y, x, n, c, flags): bnGradOut
// over dz, as bnActGradOutGo computes it.
func (g *gen) genGradOut() {
	name := "bnActGradOut" + g.s.suffix
	g.p("")
	g.p("// func %s(dst, dy, y, x unsafe.Pointer, n int, c *bnGradConsts, flags int)", name)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-56", name)
	g.p("\tMOVQ dst+0(FP), DI")
	g.p("\tMOVQ dy+8(FP), SI")
	g.p("\tMOVQ y+16(FP), BX")
	g.p("\tMOVQ x+24(FP), DX")
	g.p("\tMOVQ n+32(FP), CX")
	g.p("\tMOVQ c+40(FP), AX")
	for i, z := range []int{8, 9, 10, 11, 12, 13} { // mu, is, m, sdy, sdyx, k
		g.p("\tVBROADCASTSD %d(AX), Z%d", 8*i, z)
	}
	g.p("\tMOVQ flags+48(FP), R8")
	g.consts()
	g.tail()
	// BNOUT8 of normsimd_amd64.s: float32(k * ((m*dz - sdy) -
	// ((x-mu)*is)*sdyx)), eight at a time.
	out8 := func(dz, x, res string) {
		g.p("\tVMULPD Z10, %s, %s", dz, dz)
		g.p("\tVSUBPD Z11, %s, %s", dz, dz)
		g.p("\tVSUBPD Z8, %s, %s", x, x)
		g.p("\tVMULPD Z9, %s, %s", x, x)
		g.p("\tVMULPD Z12, %s, %s", x, x)
		g.p("\tVSUBPD %s, %s, %s", x, dz, dz)
		g.p("\tVMULPD Z13, %s, %s", dz, dz)
		g.p("\tVCVTPD2PS %s, %s", dz, res)
	}
	body := func(k, label string) {
		g.gradIn(name, k, label, false)
		g.p("\tVCVTPS2PD Y16, Z4")
		g.p("\tVEXTRACTF32X8 $1, Z16, Y19")
		g.p("\tVCVTPS2PD Y19, Z5")
		g.p("\tVCVTPS2PD Y18, Z6")
		g.p("\tVEXTRACTF32X8 $1, Z18, Y19")
		g.p("\tVCVTPS2PD Y19, Z7")
		out8("Z4", "Z6", "Y0")
		out8("Z5", "Z7", "Y1")
		g.p("\tVINSERTF32X8 $1, Y1, Z0, Z0")
		g.store("Z0", "DI", k, "Z3", "Z4", "Z5")
	}
	g.p("\tTESTQ CX, CX")
	g.p("\tJZ %s_tail", name)
	g.p("%s_step:", name)
	body("", "")
	g.advance("SI", "BX", "DX", "DI")
	g.p("\tDECQ CX")
	g.p("\tJNZ %s_step", name)
	g.p("%s_tail:", name)
	body("K1", "t")
	g.p("\tVZEROUPPER")
	g.p("\tRET")
}

// genStats writes bnSum64<T> and bnSumSqDev64<T>: bnSum64AVX512 and
// bnSumSqDev64AVX512 of normsimd_amd64.s reading 16-bit storage.
func (g *gen) genStats() {
	for _, sq := range []bool{false, true} {
		name, ret := "bnSum64"+g.s.suffix, 16
		if sq {
			name, ret = "bnSumSqDev64"+g.s.suffix, 24
		}
		g.p("")
		if sq {
			g.p("// func %s(x *uint16, n int, mu float64) float64", name)
			g.p("TEXT ·%s(SB), NOSPLIT, $0-32", name)
			g.p("\tVBROADCASTSD mu+16(FP), Z3")
		} else {
			g.p("// func %s(x *uint16, n int) float64", name)
			g.p("TEXT ·%s(SB), NOSPLIT, $0-24", name)
		}
		g.p("\tMOVQ x+0(FP), SI")
		g.p("\tMOVQ n+8(FP), CX")
		g.p("\tVPXORQ Z0, Z0, Z0")
		g.p("\tVPXORQ Z1, Z1, Z1")
		g.p("\tKXNORW K4, K4, K4")
		g.tail()
		body := func(k, ml, mh string) {
			g.load("SI", "Z6", k)
			g.p("\tVCVTPS2PD Y6, Z4")
			g.p("\tVEXTRACTF32X8 $1, Z6, Y7")
			g.p("\tVCVTPS2PD Y7, Z5")
			if sq {
				g.p("\tVSUBPD Z3, Z4, Z4")
				g.p("\tVSUBPD Z3, Z5, Z5")
				g.p("\tVMULPD Z4, Z4, Z4")
				g.p("\tVMULPD Z5, Z5, Z5")
			}
			g.p("\tVADDPD Z4, Z0, %s, Z0", ml)
			g.p("\tVADDPD Z5, Z1, %s, Z1", mh)
		}
		g.p("\tTESTQ CX, CX")
		g.p("\tJZ %s_tail", name)
		g.p("%s_step:", name)
		body("", "K4", "K4")
		g.p("\tADDQ $32, SI")
		g.p("\tDECQ CX")
		g.p("\tJNZ %s_step", name)
		g.p("%s_tail:", name)
		body("K1", "K1", "K5")
		g.p("\tVADDPD Z1, Z0, Z0")
		g.p("\tVEXTRACTF64X4 $1, Z0, Y1")
		g.p("\tVADDPD Y1, Y0, Y0")
		g.p("\tVEXTRACTF128 $1, Y0, X1")
		g.p("\tVADDPD X1, X0, X0")
		g.p("\tVPERMILPD $1, X0, X1")
		g.p("\tVADDSD X1, X0, X0")
		g.p("\tVMOVSD X0, ret+%d(FP)", ret)
		g.p("\tVZEROUPPER")
		g.p("\tRET")
	}
}

// genAdd writes add<S>(dst, x, y, n): dst = x + y, as Axpby's alpha = beta
// = 1 loop computes it: a ResNet's residual gradients meeting at a
// block's input.
func (g *gen) genAdd() {
	name := "add" + g.s.suffix
	g.p("")
	g.p("// func %s(dst, x, y unsafe.Pointer, n int)", name)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-32", name)
	g.p("\tMOVQ dst+0(FP), DI")
	g.p("\tMOVQ x+8(FP), SI")
	g.p("\tMOVQ y+16(FP), DX")
	g.p("\tMOVQ n+24(FP), CX")
	g.consts()
	g.tail()
	body := func(k string) {
		g.load("SI", "Z0", k)
		g.load("DX", "Z1", k)
		g.p("\tVADDPS Z1, Z0, Z0")
		g.store("Z0", "DI", k, "Z3", "Z4", "Z5")
	}
	g.p("\tTESTQ CX, CX")
	g.p("\tJZ %s_tail", name)
	g.p("%s_step:", name)
	body("")
	g.advance("SI", "DX", "DI")
	g.p("\tDECQ CX")
	g.p("\tJNZ %s_step", name)
	g.p("%s_tail:", name)
	body("K1")
	g.p("\tVZEROUPPER")
	g.p("\tRET")
}

func main() {
	var out bytes.Buffer
	out.WriteString(`// Code generated by bnact_gen.go; DO NOT EDIT.

//go:build !purego

#include "textflag.h"

// Batch norm's loops with the residual add and ReLU fused in (bnact.go),
// sixteen elements a step and a masked step for the rest, for float32,
// bfloat16 and binary16 storage. The sums and the gradient's arithmetic are those of
// normsimd_amd64.s, operation for operation, on the widened values.
`)
	for _, s := range []storage{f32, bf16, f16} {
		g := &gen{s: s}
		g.genAct()
		g.genGradSums()
		g.genGradOut()
		g.genAdd()
		out.Write(g.w.Bytes())
	}
	for _, s := range []storage{bf16, f16} {
		g := &gen{s: s}
		g.genStats()
		out.Write(g.w.Bytes())
	}
	if err := os.WriteFile("bnact_amd64.s", out.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
}
