//go:build ignore

// The direct convolution's kernels (conv_amd64.s; see conv.go): gen.go's
// main writes them with genConv.

package main

import (
	"bytes"
	"fmt"
)

// genConv writes the direct convolution's kernels: F32 on AVX-512, BF16
// on AMX, and the BF16 kernels' helpers.
func genConv(w *bytes.Buffer) {
	genConvFwd(w, 3)
	genConvFwd(w, 2)
	genConvFwd(w, 1)
	for _, v := range wgradFVariants {
		genConvWgradF(w, v[0], v[1])
	}
	for _, mo := range []int{1, 2} {
		for _, np := range []int{1, 2} {
			genAMXConvFwd(w, mo, np)
		}
	}
	for n := 1; n <= 4; n++ {
		genAMXConvWgrad(w, n)
	}
	genInterleaveRows(w)
	genCopyRows(w, 2)
	genCopyRows(w, 4)
	genSplitRows(w, false)
	genSplitRows(w, true)
	genMergeRows(w, false)
	genMergeRows(w, true)
}

// genConvFwd writes convFwd8x<16*nv>: an 8 x 16nv block of output pixels
// (8 output channels, nv vectors of 16 pixels), summed over a block's taps
// and each tap's channels:
//
//	for each tap: src := base + tap.Src; wp := w + tap.W
//	    for c < nc: acc[r][v] += wp[r] * src[16v:16v+16] (masked by tap.Mask[v])
//	        src += plane floats; wp += 8
//
// and then y[r][...] = acc[r] + bias[r] for rows r < rows, vector v
// stored under bits 16v to 16v+15 of ymask. The weights are broadcast (a
// row's value for all 16 pixels) and the pixels loaded straight from the
// image planes: a tap's lanes that fall on padding are masked to zero, so
// no column matrix is ever written.
//
// Registers: Z0-Z23 accumulate (row r, vector v in Z(nv*r+v)), Z24-Z26
// the pixels, Z27 a weight; SI walks the taps, CX counts them, DI is the
// image base, R8 the weight panel, DX and R9 walk a tap's pixels and
// weights, R10 counts channels, R11 is the plane's bytes and R12 nc.
func genConvFwd(w *bytes.Buffer, nv int) {
	p := printer(w)
	name := fmt.Sprintf("convFwd8x%d", 16*nv)
	p("")
	p("// func %s(w, src *float32, taps *convTap, ntaps, nc, plane int, y *float32, ldy, rows int, ymask uint64, bias *float32)", name)
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
	for v := 0; v < nv; v++ {
		p("\tKMOVW %d(SI), K%d", 8+2*v, 1+v)
	}
	// Channels two at a time (the second's pixels from R11 further on,
	// its weights 32 bytes), then the odd one left.
	step := func(pix, w string) {
		for v := 0; v < nv; v++ {
			p("\tVMOVUPS.Z %d%s, K%d, Z%d", 64*v, pix, 1+v, 24+v)
		}
		for r := 0; r < 8; r++ {
			p("\tVBROADCASTSS %d%s, Z27", 4*r+map[bool]int{true: 32, false: 0}[w == "second"], "(R9)")
			for v := 0; v < nv; v++ {
				p("\tVFMADD231PS Z%d, Z27, Z%d", 24+v, nv*r+v)
			}
		}
	}
	p("\tMOVQ R12, R10")
	p("\tSHRQ $1, R10")
	p("\tJZ %s_odd", name)
	p("%s_ch:", name)
	step("(DX)", "first")
	step("(DX)(R11*1)", "second")
	p("\tLEAQ (DX)(R11*2), DX")
	p("\tADDQ $64, R9")
	p("\tDECQ R10")
	p("\tJNZ %s_ch", name)
	p("%s_odd:", name)
	p("\tTESTQ $1, R12")
	p("\tJZ %s_nexttap", name)
	step("(DX)", "first")
	p("%s_nexttap:", name)
	p("\tADDQ $16, SI")
	p("\tDECQ CX")
	p("\tJNZ %s_tap", name)
	p("%s_store:", name)
	p("\tMOVQ bias+80(FP), AX")
	p("\tMOVQ y+48(FP), DX")
	p("\tMOVQ ldy+56(FP), R11")
	p("\tSHLQ $2, R11")
	p("\tMOVQ rows+64(FP), CX")
	p("\tMOVQ ymask+72(FP), BX")
	for v := 0; v < nv; v++ {
		p("\tKMOVW BX, K%d", 4+v)
		if v+1 < nv {
			p("\tSHRQ $16, BX")
		}
	}
	for r := 0; r < 8; r++ {
		if r > 0 {
			p("\tCMPQ CX, $%d", r)
			p("\tJLE %s_done", name)
			p("\tADDQ R11, DX")
		}
		for v := 0; v < nv; v++ {
			p("\tVADDPS.BCST %d(AX), Z%d, Z%d", 4*r, nv*r+v, nv*r+v)
			p("\tVMOVUPS Z%d, K%d, %d(DX)", nv*r+v, 4+v, 64*v)
		}
	}
	p("%s_done:", name)
	p("\tVZEROUPPER")
	p("\tRET")
}

// wgradFVariants are genConvWgradF's (cols, nv): 24 accumulators or
// fewer.
var wgradFVariants = [][2]int{{3, 2}, {2, 2}, {1, 2}, {4, 1}, {2, 1}, {1, 1}}

// wgradPixel writes one pixel's step of genConvWgradF's loop: dy's row
// (the next one when second) times each input channel's pixel (the next
// one when second), broadcast.
func wgradPixel(p func(string, ...any), cols, nv int, second bool) {
	bases := []string{"AX", "BX", "CX", "DX"}
	dy, disp := "(SI)", 0
	if second {
		dy, disp = "(SI)(R11*1)", 4
	}
	for v := 0; v < nv; v++ {
		p("\tVMOVUPS %d%s, Z%d", 64*v, dy, 24+v)
	}
	for col := 0; col < cols; col++ {
		for j, b := range bases {
			addr := fmt.Sprintf("%d(%s)", disp, b)
			switch col {
			case 1:
				addr = fmt.Sprintf("%d(%s)(R8*1)", disp, b)
			case 2:
				addr = fmt.Sprintf("%d(%s)(R8*2)", disp, b)
			case 3:
				addr = fmt.Sprintf("%d(%s)(R13*1)", disp, b)
			}
			p("\tVBROADCASTSS %s, Z26", addr)
			i := col*4 + j
			for v := 0; v < nv; v++ {
				p("\tVFMADD231PS Z%d, Z26, Z%d", 24+v, i*nv+v)
			}
		}
	}
}

// genConvWgradF writes convWgrad<nv*16>x<4*cols>: the F32 weight
// gradient of one tap for 16nv output channels by 4*cols input channels,
// an FMA micro-kernel whose k is the pixels of the images:
//
//	for each image, for each pixel q of its grid:
//	    acc[i][v] += dyT[q][16v:16v+16] * x_i[q]   (i = col*4 + j)
//
// where dyT is dy transposed (a row of output channels per pixel, ldq
// bytes apart) and x_i the tap's pixel of input channel plane j + 4*col,
// broadcast: base j (four of them, plane bytes apart) plus col times
// colStride. Both are laid out by PrepWeightGrad on the padded source's
// grid, dy zero where the grid is not the image, so no lane is masked.
// The accumulators start at acc (zero when first is not 0) and are
// stored back there; images are imgStride bytes apart.
//
// Registers: Z0-Z23 accumulate (Z(i*nv+v)), Z24-Z25 dy, Z26 x; AX, BX,
// CX, DX the bases, SI dyT, R8 colStride (R13 three of them), R9 counts
// pixels, R10 images, R11 ldq, R12 scratch.
func genConvWgradF(w *bytes.Buffer, cols, nv int) {
	p := printer(w)
	name := fmt.Sprintf("convWgrad%dx%d", 16*nv, 4*cols)
	nacc := 4 * cols * nv
	bases := []string{"AX", "BX", "CX", "DX"}
	p("")
	p("// func %s(acc, dyT *float32, ldq int, x *float32, planeB, colStride, npix, nimg, imgStride, first int)", name)
	p("TEXT ·%s(SB), NOSPLIT, $0-80", name)
	p("\tMOVQ acc+0(FP), R12")
	p("\tCMPQ first+72(FP), $0")
	p("\tJEQ %s_load", name)
	for i := 0; i < nacc; i++ {
		p("\tVXORPS Z%d, Z%d, Z%d", i, i, i)
	}
	p("\tJMP %s_start", name)
	p("%s_load:", name)
	for i := 0; i < nacc; i++ {
		p("\tVMOVUPS %d(R12), Z%d", 64*i, i)
	}
	p("%s_start:", name)
	p("\tMOVQ dyT+8(FP), SI")
	p("\tMOVQ ldq+16(FP), R11")
	p("\tMOVQ x+24(FP), AX")
	p("\tMOVQ planeB+32(FP), R12")
	for j := 1; j < 4; j++ {
		p("\tLEAQ (%s)(R12*1), %s", bases[j-1], bases[j])
	}
	p("\tMOVQ colStride+40(FP), R8")
	if cols > 3 {
		p("\tLEAQ (R8)(R8*2), R13")
	}
	p("\tMOVQ nimg+56(FP), R10")
	p("\tTESTQ R10, R10")
	p("\tJLE %s_store", name)
	p("%s_img:", name)
	p("\tMOVQ npix+48(FP), R9")
	p("\tTESTQ R9, R9")
	p("\tJLE %s_next", name)
	// Pixels two at a time (the second's dy row ldq bytes on, its x
	// pixels 4 bytes), then the odd one left.
	pixel := func(second bool) { wgradPixel(p, cols, nv, second) }
	p("\tSHRQ $1, R9")
	p("\tJZ %s_odd", name)
	p("%s_pix:", name)
	pixel(false)
	pixel(true)
	for _, b := range bases {
		p("\tADDQ $8, %s", b)
	}
	p("\tLEAQ (SI)(R11*2), SI")
	p("\tDECQ R9")
	p("\tJNZ %s_pix", name)
	p("%s_odd:", name)
	p("\tTESTQ $1, npix+48(FP)")
	p("\tJZ %s_next", name)
	pixel(false)
	for _, b := range bases {
		p("\tADDQ $4, %s", b)
	}
	p("\tADDQ R11, SI")
	p("%s_next:", name)
	// On to the next image: imgStride on from this one's start.
	p("\tMOVQ npix+48(FP), R12")
	p("\tMOVQ R12, R9")
	p("\tSHLQ $2, R12")
	p("\tNEGQ R12")
	p("\tADDQ imgStride+64(FP), R12")
	for _, b := range bases {
		p("\tADDQ R12, %s", b)
	}
	p("\tIMULQ R11, R9")
	p("\tNEGQ R9")
	p("\tADDQ imgStride+64(FP), R9")
	p("\tADDQ R9, SI")
	p("\tDECQ R10")
	p("\tJNZ %s_img", name)
	p("%s_store:", name)
	p("\tMOVQ acc+0(FP), R12")
	for i := 0; i < nacc; i++ {
		p("\tVMOVUPS Z%d, %d(R12)", i, 64*i)
	}
	p("\tVZEROUPPER")
	p("\tRET")
}

// amxEmitters are the BYTE-encoded AMX instructions of gen.go, each with
// its Intel syntax as a comment (TestByteEncodings checks them).
func amxEmitters(p func(string, ...any)) (load, store func(t int, base, index string, disp int), dp func(dst, a, b int), emit func([]byte, string)) {
	emit = func(code []byte, intel string) { p("\t%s // %s", byteDirectives(code), intel) }
	load = func(t int, base, index string, disp int) {
		emit(tileMem(false, t, base, index, disp), fmt.Sprintf("tileloadd tmm%d, %s", t, tileAddr(base, index, disp)))
	}
	store = func(t int, base, index string, disp int) {
		emit(tileMem(true, t, base, index, disp), fmt.Sprintf("tilestored %s, tmm%d", tileAddr(base, index, disp), t))
	}
	dp = func(dst, a, b int) {
		emit(tdpbf16ps(dst, a, b), fmt.Sprintf("tdpbf16ps tmm%d, tmm%d, tmm%d", dst, a, b))
	}
	return
}

// roundBF16 rounds the float32 lanes of x to bfloat16 in the low half of
// each lane, as dtype's F32ToBF16 does: add 0x7fff plus the lowest kept
// bit and drop the low 16 bits (nearest even), except that a NaN keeps
// its top half with the quiet bit set. Constants: Z26 = 1, Z27 = 0x7fff,
// Z28 = 0x40, Z29 = 0x7fffffff, Z30 = 0x7f800000; Z1, Z3, Z4 and K7 are
// scratch; the result is in out.
func roundBF16(p func(string, ...any), x, out string) {
	p("\tVPSRLD $16, %s, Z1", x)
	p("\tVPANDD Z26, Z1, Z1")
	p("\tVPADDD Z27, Z1, Z1")
	p("\tVPADDD Z1, %s, %s", x, out)
	p("\tVPSRLD $16, %s, %s", out, out)
	p("\tVPANDD Z29, %s, Z3", x)
	p("\tVPCMPGTD Z30, Z3, K7")
	p("\tVPSRLD $16, %s, Z4", x)
	p("\tVPORD Z28, Z4, Z4")
	p("\tVMOVDQA32 Z4, K7, %s", out)
}

// roundConsts loads roundBF16's constants, with CX as scratch.
func roundConsts(p func(string, ...any)) {
	for i, v := range []string{"$1", "$0x7fff", "$0x40", "$0x7fffffff", "$0x7f800000"} {
		p("\tMOVL %s, CX", v)
		p("\tVPBROADCASTD CX, Z%d", 26+i)
	}
}

// genAMXConvFwd writes amxConvFwd<mo>x<np>: the BF16 forward kernel (and
// input gradient's) on AMX. Its source is a padded, pair-interleaved image
// (channel pairs' planes, each pixel a dword of two bfloat16 channels, a
// zero border wide enough for every tap), so that a B tile, 16 channel
// pairs by 16 output pixels, is a plain strided load: row r is pair r's
// 16 pixels, pstride bytes after row r-1, shifted by the tap's offset.
// For each job (one run of up to 16np output pixels of one row) it sums,
// over the taps and each tap's npt pair tiles, mo A tiles (16 output
// channels by 16 pairs, from the weight panel, in the order the loops
// read them) times np B tiles into mo x np C tiles; then it stores the C
// tiles on the stack, adds the bias and rounds each row of 16 pixels to
// bfloat16 into y (output channel oc's row at y + oc*ldy bytes + the
// job's yoff elements, under the job's masks), for oc < rows.
//
// Tile registers: tmm0-3 C (tile i*np+j), tmm4-5 A, tmm6-7 B. General
// registers: R8 the weight panel, SI the source, R9 pstride, R10 the
// jobs, R11 counts them, R12 and R13 walk and count the taps, R14 counts
// pair tiles, R15 is 64, AX and BX walk A and B, DX is the job's source
// base, CX and DI scratch; in the conversion R12 is the stack scratch,
// R13 the rows left, R14 ldy, AX walks the scratch rows, BX counts them,
// CX walks the bias and DI y's rows.
func genAMXConvFwd(w *bytes.Buffer, mo, np int) {
	p := printer(w)
	name := fmt.Sprintf("amxConvFwd%dx%d", mo, np)
	load, store, dp, emit := amxEmitters(p)
	p("")
	p("// func %s(cfg *byte, a *uint16, b *uint32, taps *int32, ntaps, npt, pstride int, jobs *amxJob, njobs int, y *uint16, ldy, rows int, bias *float32)", name)
	p("TEXT ·%s(SB), 0, $4160-104", name)
	roundConsts(p)
	p("\tMOVQ njobs+64(FP), R11")
	p("\tTESTQ R11, R11")
	p("\tJLE %s_ret", name)
	p("\tMOVQ cfg+0(FP), AX")
	emit(ldtilecfg("AX"), "ldtilecfg [rax]")
	p("\tMOVQ a+8(FP), R8")
	p("\tMOVQ b+16(FP), SI")
	p("\tMOVQ pstride+48(FP), R9")
	p("\tMOVQ jobs+56(FP), R10")
	p("\tMOVQ $64, R15")
	p("%s_job:", name)
	for t := 0; t < mo*np; t++ {
		emit(tilezero(t), fmt.Sprintf("tilezero tmm%d", t))
	}
	p("\tMOVLQSX 0(R10), CX")
	p("\tLEAQ (SI)(CX*4), DX")
	p("\tMOVQ R8, AX")
	p("\tMOVQ taps+24(FP), R12")
	p("\tMOVQ ntaps+32(FP), R13")
	p("%s_tap:", name)
	p("\tMOVLQSX (R12), CX")
	p("\tLEAQ (DX)(CX*4), BX")
	p("\tMOVQ npt+40(FP), R14")
	p("%s_pt:", name)
	for i := 0; i < mo; i++ {
		load(4+i, "AX", "R15", 1024*i)
	}
	for j := 0; j < np; j++ {
		load(6+j, "BX", "R9", 64*j)
	}
	for i := 0; i < mo; i++ {
		for j := 0; j < np; j++ {
			dp(i*np+j, 4+i, 6+j)
		}
	}
	p("\tADDQ $%d, AX", 1024*mo)
	p("\tMOVQ R9, CX")
	p("\tSHLQ $4, CX")
	p("\tADDQ CX, BX")
	p("\tDECQ R14")
	p("\tJNZ %s_pt", name)
	p("\tADDQ $4, R12")
	p("\tDECQ R13")
	p("\tJNZ %s_tap", name)
	// The C tiles to an aligned scratch, tile t at t*1024, 64-byte rows.
	p("\tLEAQ 63(SP), R12")
	p("\tANDQ $-64, R12")
	for t := 0; t < mo*np; t++ {
		store(t, "R12", "R15", 1024*t)
	}
	p("\tMOVQ y+72(FP), DI")
	p("\tMOVLQSX 4(R10), CX")
	p("\tLEAQ (DI)(CX*2), DI")
	p("\tKMOVW 8(R10), K1")
	if np > 1 {
		p("\tKMOVW 10(R10), K2")
	}
	p("\tMOVQ rows+88(FP), R13")
	p("\tMOVQ ldy+80(FP), R14")
	p("\tMOVQ bias+96(FP), CX")
	for i := 0; i < mo; i++ {
		p("\tLEAQ %d(R12), AX", 1024*np*i)
		p("\tMOVQ $16, BX")
		p("%s_row%d:", name, i)
		p("\tTESTQ R13, R13")
		p("\tJLE %s_next", name)
		p("\tVBROADCASTSS (CX), Z31")
		for j := 0; j < np; j++ {
			p("\tVADDPS %d(AX), Z31, Z0", 1024*j)
			roundBF16(p, "Z0", "Z2")
			p("\tVPMOVDW Z2, K%d, %d(DI)", 1+j, 32*j)
		}
		p("\tADDQ $4, CX")
		p("\tADDQ $64, AX")
		p("\tADDQ R14, DI")
		p("\tDECQ R13")
		p("\tDECQ BX")
		p("\tJNZ %s_row%d", name, i)
	}
	p("%s_next:", name)
	p("\tADDQ $12, R10")
	p("\tDECQ R11")
	p("\tJNZ %s_job", name)
	emit(tilerelease, "tilerelease")
	p("%s_ret:", name)
	p("\tVZEROUPPER")
	p("\tRET")
}

// genAMXConvWgrad writes amxConvWgrad<n>: n C tiles of the BF16 weight
// gradient on AMX, each 16 input channels (one kernel tap) by 16 output
// channels, summed over 32-pixel blocks of nimg images: tile c adds, for
// each block, A (16 channel rows of 32 pixels, the padded source plane
// read at a + offs[c] + 64*block bytes, rows lda bytes apart) times B (16
// rows of pixel pairs, each 16 output channels' dwords of dy, ldb bytes
// apart, at b + 16*ldb*block). The tiles start as acc (16 rows of 64
// bytes each, tile c at acc + 1024c), or zero when first is not 0, and
// are stored back there.
//
// Tile registers: tmm0-3 C, tmm4-5 A (alternately), tmm6 B. General
// registers: R8 and SI the image's A and B, R9 lda, R10 ldb, R11 offs,
// R12 counts blocks, R13 images, R15 is 64, DX and BX walk A and B, CX
// scratch, AX acc.
func genAMXConvWgrad(w *bytes.Buffer, n int) {
	p := printer(w)
	name := fmt.Sprintf("amxConvWgrad%d", n)
	load, store, dp, emit := amxEmitters(p)
	p("")
	p("// func %s(cfg *byte, acc *float32, a *uint16, lda int, offs *int, b *uint32, ldb, nblk, nimg, aImg, bImg, first int)", name)
	p("TEXT ·%s(SB), NOSPLIT, $0-96", name)
	p("\tMOVQ cfg+0(FP), AX")
	emit(ldtilecfg("AX"), "ldtilecfg [rax]")
	p("\tMOVQ acc+8(FP), AX")
	p("\tMOVQ $64, R15")
	p("\tCMPQ first+88(FP), $0")
	p("\tJEQ %s_load", name)
	for c := 0; c < n; c++ {
		emit(tilezero(c), fmt.Sprintf("tilezero tmm%d", c))
	}
	p("\tJMP %s_start", name)
	p("%s_load:", name)
	for c := 0; c < n; c++ {
		load(c, "AX", "R15", 1024*c)
	}
	p("%s_start:", name)
	p("\tMOVQ a+16(FP), R8")
	p("\tMOVQ lda+24(FP), R9")
	p("\tMOVQ offs+32(FP), R11")
	p("\tMOVQ b+40(FP), SI")
	p("\tMOVQ ldb+48(FP), R10")
	p("\tMOVQ nimg+64(FP), R13")
	p("\tTESTQ R13, R13")
	p("\tJLE %s_store", name)
	p("%s_img:", name)
	p("\tMOVQ R8, DX")
	p("\tMOVQ SI, BX")
	p("\tMOVQ nblk+56(FP), R12")
	p("\tTESTQ R12, R12")
	p("\tJLE %s_nextimg", name)
	p("%s_blk:", name)
	load(6, "BX", "R10", 0)
	for c := 0; c < n; c++ {
		p("\tMOVQ %d(R11), CX", 8*c)
		p("\tADDQ DX, CX")
		load(4+c%2, "CX", "R9", 0)
		dp(c, 4+c%2, 6)
	}
	p("\tADDQ $64, DX")
	p("\tMOVQ R10, CX")
	p("\tSHLQ $4, CX")
	p("\tADDQ CX, BX")
	p("\tDECQ R12")
	p("\tJNZ %s_blk", name)
	p("%s_nextimg:", name)
	p("\tADDQ aImg+72(FP), R8")
	p("\tADDQ bImg+80(FP), SI")
	p("\tDECQ R13")
	p("\tJNZ %s_img", name)
	p("%s_store:", name)
	for c := 0; c < n; c++ {
		store(c, "AX", "R15", 1024*c)
	}
	emit(tilerelease, "tilerelease")
	p("\tRET")
}

// genInterleaveRows writes interleaveRows: rows of two bfloat16 planes
// interleaved into dwords, dst[r*ldd+i] = a[r*lds+i] | b[r*lds+i]<<16 for
// i < n, r < rows (strides in elements), 32 pixels at a time (VPERMT2W),
// the last run masked. b may be nil: the high halves are then zero.
func genInterleaveRows(w *bytes.Buffer) {
	p := printer(w)
	const name = "interleaveRows"
	p("")
	p("// func %s(dst *uint32, ldd int, a, b *uint16, lds, rows, n int, idx *uint16)", name)
	p("TEXT ·%s(SB), NOSPLIT, $0-64", name)
	p("\tMOVQ dst+0(FP), DI")
	p("\tMOVQ ldd+8(FP), R8")
	p("\tSHLQ $2, R8")
	p("\tMOVQ a+16(FP), SI")
	p("\tMOVQ b+24(FP), DX")
	p("\tMOVQ lds+32(FP), R9")
	p("\tSHLQ $1, R9")
	p("\tMOVQ rows+40(FP), R10")
	p("\tMOVQ idx+56(FP), AX")
	// Z30: the words of a's first 16 lanes and b's, alternately; Z31 the
	// next 16.
	p("\tVMOVDQU16 (AX), Z30")
	p("\tVMOVDQU16 64(AX), Z31")
	p("\tTESTQ R10, R10")
	p("\tJLE %s_done", name)
	p("%s_row:", name)
	p("\tMOVQ n+48(FP), CX")
	p("\tXORQ R11, R11") // element offset in the row
	p("%s_run:", name)
	p("\tCMPQ CX, $32")
	p("\tJLT %s_tail", name)
	p("\tVMOVDQU16 (SI)(R11*2), Z0")
	p("\tVPXORD Z1, Z1, Z1")
	p("\tTESTQ DX, DX")
	p("\tJZ %s_nob", name)
	p("\tVMOVDQU16 (DX)(R11*2), Z1")
	p("%s_nob:", name)
	p("\tVMOVDQA64 Z0, Z2")
	p("\tVPERMT2W Z1, Z30, Z2")
	p("\tVPERMT2W Z1, Z31, Z0")
	p("\tVMOVDQU32 Z2, (DI)(R11*4)")
	p("\tVMOVDQU32 Z0, 64(DI)(R11*4)")
	p("\tADDQ $32, R11")
	p("\tSUBQ $32, CX")
	p("\tJMP %s_run", name)
	p("%s_tail:", name)
	p("\tTESTQ CX, CX")
	p("\tJLE %s_endrow", name)
	// K1: the tail's words; K2 and K3 its dwords, in two halves.
	p("\tMOVL $1, BX")
	p("\tSHLL CX, BX")
	p("\tDECL BX")
	p("\tKMOVD BX, K1")
	p("\tKMOVW BX, K2")
	p("\tSHRL $16, BX")
	p("\tKMOVW BX, K3")
	p("\tVMOVDQU16.Z (SI)(R11*2), K1, Z0")
	p("\tVPXORD Z1, Z1, Z1")
	p("\tTESTQ DX, DX")
	p("\tJZ %s_nobt", name)
	p("\tVMOVDQU16.Z (DX)(R11*2), K1, Z1")
	p("%s_nobt:", name)
	p("\tVMOVDQA64 Z0, Z2")
	p("\tVPERMT2W Z1, Z30, Z2")
	p("\tVPERMT2W Z1, Z31, Z0")
	p("\tVMOVDQU32 Z2, K2, (DI)(R11*4)")
	p("\tVMOVDQU32 Z0, K3, 64(DI)(R11*4)")
	p("%s_endrow:", name)
	p("\tADDQ R8, DI")
	p("\tADDQ R9, SI")
	p("\tTESTQ DX, DX")
	p("\tJZ %s_nextrow", name)
	p("\tADDQ R9, DX")
	p("%s_nextrow:", name)
	p("\tDECQ R10")
	p("\tJNZ %s_row", name)
	p("%s_done:", name)
	p("\tVZEROUPPER")
	p("\tRET")
}

// genCopyRows writes copyRows16 (size 2) or copyRows32 (size 4): rows of
// n elements, dst[r*ldd+i] = src[r*lds+i], 64 bytes at a time, the last
// run masked.
func genCopyRows(w *bytes.Buffer, size int) {
	p := printer(w)
	name, shift, per, mov, kmov := "copyRows16", 1, 32, "VMOVDQU16", "KMOVD"
	if size == 4 {
		name, shift, per, mov, kmov = "copyRows32", 2, 16, "VMOVDQU32", "KMOVW"
	}
	p("")
	p("// func %s(dst unsafe.Pointer, ldd int, src unsafe.Pointer, lds, rows, n int)", name)
	p("TEXT ·%s(SB), NOSPLIT, $0-48", name)
	p("\tMOVQ dst+0(FP), DI")
	p("\tMOVQ ldd+8(FP), R8")
	p("\tSHLQ $%d, R8", shift)
	p("\tMOVQ src+16(FP), SI")
	p("\tMOVQ lds+24(FP), R9")
	p("\tSHLQ $%d, R9", shift)
	p("\tMOVQ rows+32(FP), R10")
	p("\tMOVQ n+40(FP), DX")
	// K1: the last run's elements.
	p("\tMOVQ DX, CX")
	p("\tANDQ $%d, CX", per-1)
	p("\tMOVL $1, BX")
	p("\tSHLL CX, BX")
	p("\tDECL BX")
	p("\t%s BX, K1", kmov)
	p("\tTESTQ R10, R10")
	p("\tJLE %s_done", name)
	p("%s_row:", name)
	p("\tXORQ R11, R11")
	p("\tMOVQ DX, CX")
	p("%s_run:", name)
	p("\tCMPQ CX, $%d", per)
	p("\tJLT %s_tail", name)
	p("\t%s (SI)(R11*%d), Z0", mov, size)
	p("\t%s Z0, (DI)(R11*%d)", mov, size)
	p("\tADDQ $%d, R11", per)
	p("\tSUBQ $%d, CX", per)
	p("\tJMP %s_run", name)
	p("%s_tail:", name)
	p("\tTESTQ CX, CX")
	p("\tJLE %s_endrow", name)
	p("\t%s.Z (SI)(R11*%d), K1, Z0", mov, size)
	p("\t%s Z0, K1, (DI)(R11*%d)", mov, size)
	p("%s_endrow:", name)
	p("\tADDQ R8, DI")
	p("\tADDQ R9, SI")
	p("\tDECQ R10")
	p("\tJNZ %s_row", name)
	p("%s_done:", name)
	p("\tVZEROUPPER")
	p("\tRET")
}

// evenOddIdx writes the VPERMT2PS indexes of the F32 split and merge:
// convEven picks elements 0, 2, ..., 30 of two registers (a then b),
// convOdd 1, 3, ..., 31; convLo and convHi interleave the first and last
// 8 elements of a and b (a0 b0 a1 b1 ...).
func evenOddIdx(p func(string, ...any)) {
	table := func(name string, idx func(i int) int) {
		for q := 0; q < 8; q++ {
			p("DATA %s<>+%d(SB)/8, $0x%08x%08x", name, 8*q, idx(2*q+1), idx(2*q))
		}
		p("GLOBL %s<>(SB), RODATA|NOPTR, $64", name)
	}
	p("")
	table("convEven", func(i int) int { return 2 * i })
	table("convOdd", func(i int) int { return 2*i + 1 })
	table("convLo", func(i int) int { return i/2 + 16*(i%2) })
	table("convHi", func(i int) int { return 8 + i/2 + 16*(i%2) })
}

// genSplitRows writes splitRowsF32 or splitRows16: the column phases of a
// stride-2 split, row by row: dst0[r*ldd+j] = src[r*lds+2j] and
// dst1[r*ldd+j] = src[r*lds+2j+1] for j < (w+1)/2, each zero where it
// would read past the row's w elements; dst1 may be nil. 32 source
// elements a step, the last masked.
func genSplitRows(w *bytes.Buffer, half bool) {
	p := printer(w)
	name, size := "splitRowsF32", 4
	if half {
		name, size = "splitRows16", 2
	} else {
		evenOddIdx(p)
	}
	p("")
	p("// func %s(dst0, dst1 unsafe.Pointer, ldd int, src unsafe.Pointer, lds, rows, w int)", name)
	p("TEXT ·%s(SB), NOSPLIT, $0-56", name)
	p("\tMOVQ dst0+0(FP), DI")
	p("\tMOVQ dst1+8(FP), DX")
	p("\tMOVQ ldd+16(FP), R8")
	p("\tSHLQ $%d, R8", map[int]int{4: 2, 2: 1}[size])
	p("\tMOVQ src+24(FP), SI")
	p("\tMOVQ lds+32(FP), R9")
	p("\tSHLQ $%d, R9", map[int]int{4: 2, 2: 1}[size])
	p("\tMOVQ rows+40(FP), R10")
	if !half {
		p("\tVMOVDQU32 convEven<>(SB), Z30")
		p("\tVMOVDQU32 convOdd<>(SB), Z31")
	}
	p("\tTESTQ R10, R10")
	p("\tJLE %s_done", name)
	p("%s_row:", name)
	p("\tMOVQ w+48(FP), CX")
	p("\tXORQ R11, R11") // source element of the step
	p("%s_step:", name)
	p("\tTESTQ CX, CX")
	p("\tJLE %s_endrow", name)
	// K1: the step's source elements (up to 32); K2: its outputs, half
	// as many rounded up, for each phase.
	p("\tMOVQ $32, BX")
	p("\tCMPQ CX, BX")
	p("\tCMOVQLT CX, BX")
	p("\tMOVQ $-1, AX")
	p("\tBZHIQ BX, AX, AX")
	p("\tKMOVD AX, K1")
	p("\tADDQ $1, BX")
	p("\tSHRQ $1, BX")
	p("\tMOVQ $-1, AX")
	p("\tBZHIQ BX, AX, AX")
	p("\tKMOVW AX, K2")
	p("\tMOVQ R11, BX")
	p("\tSHRQ $1, BX") // output element of the step
	if half {
		p("\tVMOVDQU16.Z (SI)(R11*2), K1, Z0")
		p("\tVPMOVDW Z0, Y1")
		p("\tVMOVDQU16 Y1, K2, (DI)(BX*2)")
		p("\tTESTQ DX, DX")
		p("\tJZ %s_next", name)
		p("\tVPSRLD $16, Z0, Z0")
		p("\tVPMOVDW Z0, Y1")
		p("\tVMOVDQU16 Y1, K2, (DX)(BX*2)")
	} else {
		p("\tKMOVW AX, K2")
		p("\tMOVQ $-1, AX")
		p("\tMOVQ $32, R12")
		p("\tCMPQ CX, R12")
		p("\tCMOVQLT CX, R12")
		p("\tBZHIQ R12, AX, AX")
		p("\tKMOVW AX, K3")
		p("\tSHRQ $16, AX")
		p("\tKMOVW AX, K4")
		p("\tVMOVUPS.Z (SI)(R11*4), K3, Z0")
		p("\tVMOVUPS.Z 64(SI)(R11*4), K4, Z1")
		p("\tVMOVAPS Z0, Z2")
		p("\tVPERMT2PS Z1, Z30, Z2")
		p("\tVMOVUPS Z2, K2, (DI)(BX*4)")
		p("\tTESTQ DX, DX")
		p("\tJZ %s_next", name)
		p("\tVPERMT2PS Z1, Z31, Z0")
		p("\tVMOVUPS Z0, K2, (DX)(BX*4)")
	}
	p("%s_next:", name)
	p("\tADDQ $32, R11")
	p("\tSUBQ $32, CX")
	p("\tJMP %s_step", name)
	p("%s_endrow:", name)
	p("\tADDQ R8, DI")
	p("\tADDQ R9, SI")
	p("\tTESTQ DX, DX")
	p("\tJZ %s_nodst1", name)
	p("\tADDQ R8, DX")
	p("%s_nodst1:", name)
	p("\tDECQ R10")
	p("\tJNZ %s_row", name)
	p("%s_done:", name)
	p("\tVZEROUPPER")
	p("\tRET")
}

// genMergeRows writes mergeRowsF32 or mergeRows16, the inverse:
// dst[r*ldd+2j] = src0[r*lds+j] and dst[r*ldd+2j+1] = src1[r*lds+j], for
// the row's first w elements of dst. 32 elements of dst a step, the last
// masked.
func genMergeRows(w *bytes.Buffer, half bool) {
	p := printer(w)
	name, shift := "mergeRowsF32", 2
	if half {
		name, shift = "mergeRows16", 1
	}
	p("")
	p("// func %s(dst unsafe.Pointer, ldd int, src0, src1 unsafe.Pointer, lds, rows, w int)", name)
	p("TEXT ·%s(SB), NOSPLIT, $0-56", name)
	p("\tMOVQ dst+0(FP), DI")
	p("\tMOVQ ldd+8(FP), R8")
	p("\tSHLQ $%d, R8", shift)
	p("\tMOVQ src0+16(FP), SI")
	p("\tMOVQ src1+24(FP), DX")
	p("\tMOVQ lds+32(FP), R9")
	p("\tSHLQ $%d, R9", shift)
	p("\tMOVQ rows+40(FP), R10")
	if !half {
		p("\tVMOVDQU32 convLo<>(SB), Z30")
		p("\tVMOVDQU32 convHi<>(SB), Z31")
	}
	p("\tTESTQ R10, R10")
	p("\tJLE %s_done", name)
	p("%s_row:", name)
	p("\tMOVQ w+48(FP), CX")
	p("\tXORQ R11, R11") // dst element of the step
	p("%s_step:", name)
	p("\tTESTQ CX, CX")
	p("\tJLE %s_endrow", name)
	p("\tMOVQ $32, BX")
	p("\tCMPQ CX, BX")
	p("\tCMOVQLT CX, BX")
	p("\tMOVQ $-1, AX")
	p("\tBZHIQ BX, AX, AX")
	p("\tKMOVD AX, K1") // the step's dst elements
	p("\tADDQ $1, BX")
	p("\tSHRQ $1, BX")
	p("\tMOVQ $-1, R12")
	p("\tBZHIQ BX, R12, R12")
	p("\tKMOVW R12, K2") // its source elements in each phase
	p("\tMOVQ R11, BX")
	p("\tSHRQ $1, BX")
	if half {
		p("\tVPMOVZXWD.Z (SI)(BX*2), K2, Z0")
		p("\tVPMOVZXWD.Z (DX)(BX*2), K2, Z1")
		p("\tVPSLLD $16, Z1, Z1")
		p("\tVPORD Z1, Z0, Z0")
		p("\tVMOVDQU16 Z0, K1, (DI)(R11*2)")
	} else {
		p("\tVMOVUPS.Z (SI)(BX*4), K2, Z0")
		p("\tVMOVUPS.Z (DX)(BX*4), K2, Z1")
		p("\tVMOVAPS Z0, Z2")
		p("\tVPERMT2PS Z1, Z30, Z2")
		p("\tVPERMT2PS Z1, Z31, Z0")
		p("\tKMOVW AX, K3")
		p("\tSHRQ $16, AX")
		p("\tKMOVW AX, K4")
		p("\tVMOVUPS Z2, K3, (DI)(R11*4)")
		p("\tVMOVUPS Z0, K4, 64(DI)(R11*4)")
	}
	p("\tADDQ $32, R11")
	p("\tSUBQ $32, CX")
	p("\tJMP %s_step", name)
	p("%s_endrow:", name)
	p("\tADDQ R8, DI")
	p("\tADDQ R9, SI")
	p("\tADDQ R9, DX")
	p("\tDECQ R10")
	p("\tJNZ %s_row", name)
	p("%s_done:", name)
	p("\tVZEROUPPER")
	p("\tRET")
}
