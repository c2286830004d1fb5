//go:build ignore

// The direct convolution's kernels (conv_amd64.s; see conv.go): gen.go's
// main writes them with genConv.

package main

import (
	"bytes"
	"fmt"
)

// genConv writes the direct convolution's F32 kernels.
func genConv(w *bytes.Buffer) {
	genConvFwd(w, 2)
	genConvFwd(w, 1)
	genConvWgrad(w)
}

// genConvFwd writes convFwd8x<16*nv>: an 8 x 16nv block of output pixels
// (8 output channels, nv vectors of 16 pixels), summed over a block's taps
// and each tap's channels:
//
//	for each tap: src := base + tap.Src; wp := w + tap.W
//	    for c < nc: acc[r][v] += wp[r] * src[16v:16v+16] (masked by tap.Mask[v])
//	        src += plane floats; wp += 8
//
// and then y[r][...] = acc[r] + bias[r] for rows r < rows, each vector
// stored under its half of ymask. The weights are broadcast (a row's
// value for all 16 pixels) and the pixels loaded straight from the image
// planes: a tap's lanes that fall on padding are masked to zero, so no
// column matrix is ever written.
//
// Registers: Z0-Z15 accumulate (row r, vector v in Z(nv*r+v)), Z16-Z17 the
// pixels, Z18 a weight; SI walks the taps, CX counts them, DI is the image
// base, R8 the weight panel, DX and R9 walk a tap's pixels and weights, R10
// counts channels, R11 is the plane's bytes and R12 nc.
func genConvFwd(w *bytes.Buffer, nv int) {
	p := printer(w)
	name := fmt.Sprintf("convFwd8x%d", 16*nv)
	p("")
	p("// func %s(w, src *float32, taps *ConvTap, ntaps, nc, plane int, y *float32, ldy, rows int, ymask uint32, bias *float32)", name)
	p("TEXT ·%s(SB), NOSPLIT, $0-88", name)
	p("\tMOVQ w+0(FP), R8")
	p("\tMOVQ src+8(FP), DI")
	p("\tMOVQ taps+16(FP), SI")
	p("\tMOVQ ntaps+24(FP), CX")
	p("\tMOVQ nc+32(FP), R12")
	p("\tMOVQ plane+40(FP), R11")
	p("\tSHLQ $2, R11")
	for i := 0; i < 8*nv; i++ {
		p("\tVXORPS Z%d, Z%d, Z%d", i, i, i)
	}
	p("\tTESTQ CX, CX")
	p("\tJZ %s_store", name)
	p("\tTESTQ R12, R12")
	p("\tJZ %s_store", name)
	p("%s_tap:", name)
	p("\tMOVLQSX 0(SI), DX")
	p("\tADDQ DI, DX")
	p("\tMOVLQSX 4(SI), R9")
	p("\tADDQ R8, R9")
	p("\tKMOVW 8(SI), K1")
	if nv > 1 {
		p("\tKMOVW 10(SI), K2")
	}
	p("\tMOVQ R12, R10")
	p("%s_ch:", name)
	p("\tVMOVUPS.Z (DX), K1, Z16")
	if nv > 1 {
		p("\tVMOVUPS.Z 64(DX), K2, Z17")
	}
	for r := 0; r < 8; r++ {
		p("\tVBROADCASTSS %d(R9), Z18", 4*r)
		for v := 0; v < nv; v++ {
			p("\tVFMADD231PS Z%d, Z18, Z%d", 16+v, nv*r+v)
		}
	}
	p("\tADDQ R11, DX")
	p("\tADDQ $32, R9")
	p("\tDECQ R10")
	p("\tJNZ %s_ch", name)
	p("\tADDQ $16, SI")
	p("\tDECQ CX")
	p("\tJNZ %s_tap", name)
	p("%s_store:", name)
	p("\tMOVQ bias+80(FP), AX")
	p("\tMOVQ y+48(FP), DX")
	p("\tMOVQ ldy+56(FP), R11")
	p("\tSHLQ $2, R11")
	p("\tMOVQ rows+64(FP), CX")
	p("\tMOVL ymask+72(FP), BX")
	p("\tKMOVW BX, K3")
	if nv > 1 {
		p("\tSHRL $16, BX")
		p("\tKMOVW BX, K4")
	}
	for r := 0; r < 8; r++ {
		if r > 0 {
			p("\tCMPQ CX, $%d", r)
			p("\tJLE %s_done", name)
			p("\tADDQ R11, DX")
		}
		for v := 0; v < nv; v++ {
			p("\tVADDPS.BCST %d(AX), Z%d, Z%d", 4*r, nv*r+v, nv*r+v)
			p("\tVMOVUPS Z%d, K%d, %d(DX)", nv*r+v, 3+v, 64*v)
		}
	}
	p("%s_done:", name)
	p("\tVZEROUPPER")
	p("\tRET")
}

// genConvWgrad writes convWgrad4x4: the weight gradient of one kernel tap
// for 4 output channels by 4 input channels, over nimg images:
//
//	for each image, for each entry e:
//	    acc[r][c] += dy_r[e.Dy:e.Dy+16] (masked by e.MaskDy) * x_c[e.X:e.X+16] (masked by e.MaskX)
//
// lane by lane, and then each accumulator's 16 lanes summed by a fixed
// tree into out: out[4c+r] is acc[r][c]'s sum. Rows past ndy (nx) repeat
// the last valid one, so an edge tile reads only memory it may.
//
// Registers: AX, BX, CX, DX point at the four dy rows and SI, DI, R8, R9
// at the four x rows; R10 walks the entries, R11 counts them, R12 the
// images; R13 and R14 are an entry's offsets. Z0-Z15 accumulate (Z(4r+c)),
// Z16-Z19 hold dy's rows, Z20-Z23 x's.
func genConvWgrad(w *bytes.Buffer) {
	p := printer(w)
	const name = "convWgrad4x4"
	p("")
	p("// func %s(out, dy *float32, ldy, ndy int, x *float32, ldx, nx int, ents *ConvEnt, nent, nimg, dyImg, xImg int)", name)
	p("TEXT ·%s(SB), NOSPLIT, $0-96", name)
	rows := func(base, ld, n string, regs [4]string) {
		p("\tMOVQ %s, %s", base, regs[0])
		p("\tMOVQ %s, R15", ld)
		p("\tSHLQ $2, R15")
		p("\tMOVQ %s, R12", n)
		for i := 1; i < 4; i++ {
			p("\tMOVQ %s, %s", regs[i-1], regs[i])
			p("\tADDQ R15, %s", regs[i])
			p("\tCMPQ R12, $%d", i)
			p("\tCMOVQLE %s, %s", regs[i-1], regs[i])
		}
	}
	dyRegs := [4]string{"AX", "BX", "CX", "DX"}
	xRegs := [4]string{"SI", "DI", "R8", "R9"}
	p("\tMOVQ dy+8(FP), AX")
	rows("AX", "ldy+16(FP)", "ndy+24(FP)", dyRegs)
	p("\tMOVQ x+32(FP), SI")
	rows("SI", "ldx+40(FP)", "nx+48(FP)", xRegs)
	for i := 0; i < 16; i++ {
		p("\tVXORPS Z%d, Z%d, Z%d", i, i, i)
	}
	p("\tMOVQ nimg+72(FP), R12")
	p("\tTESTQ R12, R12")
	p("\tJZ %s_reduce", name)
	p("%s_img:", name)
	p("\tMOVQ ents+56(FP), R10")
	p("\tMOVQ nent+64(FP), R11")
	p("\tTESTQ R11, R11")
	p("\tJZ %s_next", name)
	p("%s_ent:", name)
	p("\tMOVLQSX 0(R10), R13")
	p("\tMOVLQSX 4(R10), R14")
	p("\tKMOVW 8(R10), K1")
	p("\tKMOVW 10(R10), K2")
	for r, reg := range dyRegs {
		p("\tVMOVUPS.Z (%s)(R13*4), K2, Z%d", reg, 16+r)
	}
	for c, reg := range xRegs {
		p("\tVMOVUPS.Z (%s)(R14*4), K1, Z%d", reg, 20+c)
		for r := 0; r < 4; r++ {
			p("\tVFMADD231PS Z%d, Z%d, Z%d", 20+c, 16+r, 4*r+c)
		}
	}
	p("\tADDQ $12, R10")
	p("\tDECQ R11")
	p("\tJNZ %s_ent", name)
	p("%s_next:", name)
	p("\tMOVQ dyImg+80(FP), R15")
	p("\tSHLQ $2, R15")
	for _, reg := range dyRegs {
		p("\tADDQ R15, %s", reg)
	}
	p("\tMOVQ xImg+88(FP), R15")
	p("\tSHLQ $2, R15")
	for _, reg := range xRegs {
		p("\tADDQ R15, %s", reg)
	}
	p("\tDECQ R12")
	p("\tJNZ %s_img", name)
	p("%s_reduce:", name)
	// Four levels, each adding two halves of pairs of registers: 128-bit
	// lanes across the register (VSHUFF64X2), then 32-bit elements within
	// lanes (VSHUFPS). Level i leaves 16 >> (i+1) registers.
	level := func(n int, shuf string, lo, hi int) {
		for i := 0; i < n; i++ {
			a, b := 2*i, 2*i+1
			p("\t%s $0x%02x, Z%d, Z%d, Z24", shuf, lo, b, a)
			p("\t%s $0x%02x, Z%d, Z%d, Z25", shuf, hi, b, a)
			p("\tVADDPS Z25, Z24, Z%d", i)
		}
	}
	level(8, "VSHUFF64X2", 0x44, 0xEE)
	level(4, "VSHUFF64X2", 0x88, 0xDD)
	level(2, "VSHUFPS", 0x44, 0xEE)
	level(1, "VSHUFPS", 0x88, 0xDD)
	p("\tMOVQ out+0(FP), AX")
	p("\tVMOVUPS Z0, (AX)")
	p("\tVZEROUPPER")
	p("\tRET")
}
