package gemm

import "unsafe"

// The phases of a strided convolution: Split's planes of every stride-th
// row and column, and the input gradient's phases merged back into dx. At
// stride 2 (ResNet's) the rows go through the AVX-512 loops of
// genSplitRows and genMergeRows, a row of each column phase at a time;
// other strides, and the merge of an odd width, take the Go loops.

// phaseOf returns the index of phase (a, b) among c.phases, or -1.
func (c *Conv) phaseOf(a, b int) int {
	for i, p := range c.phases {
		if p == [2]int{a, b} {
			return i
		}
	}
	return -1
}

// ptr is &s[i] as an unsafe.Pointer, nil for a nil slice.
func ptr[T float32 | uint16](s []T, i int) unsafe.Pointer {
	if s == nil {
		return nil
	}
	return unsafe.Pointer(&s[i])
}

// splitImage writes the phases of one image img (C planes of H x W) into
// dst (SplitLen elements): see Split.
func splitImage[T float32 | uint16](c *Conv, dst, img []T) {
	g := c.g
	hw, plane := g.H*g.W, c.hs*c.ws
	_ = img[g.C*hw-1]
	_ = dst[len(c.phases)*g.C*plane-1]
	if directConv && g.StrideH == 2 && g.StrideW == 2 {
		done := 0
		for a := 0; a < 2; a++ {
			p0, p1 := c.phaseOf(a, 0), c.phaseOf(a, 1)
			if p0 < 0 {
				continue // taken by the Go loop below
			}
			rows := (g.H - a + 1) / 2
			for ch := range g.C {
				var d1 []T
				if p1 >= 0 {
					d1 = dst[(p1*g.C+ch)*plane : (p1*g.C+ch+1)*plane]
				}
				d0 := dst[(p0*g.C+ch)*plane : (p0*g.C+ch+1)*plane]
				if rows > 0 {
					var z T
					switch any(z).(type) {
					case float32:
						splitRowsF32(ptr(d0, 0), ptr(d1, 0), c.ws, ptr(img, ch*hw+a*g.W), 2*g.W, rows, g.W)
					default:
						splitRows16(ptr(d0, 0), ptr(d1, 0), c.ws, ptr(img, ch*hw+a*g.W), 2*g.W, rows, g.W)
					}
				}
				clear(d0[rows*c.ws:])
				if d1 != nil {
					clear(d1[rows*c.ws:])
				}
			}
			done++
			if p1 >= 0 {
				done++
			}
		}
		if done == len(c.phases) {
			return
		}
	}
	for p, ph := range c.phases {
		if directConv && g.StrideH == 2 && g.StrideW == 2 && c.phaseOf(ph[0], 0) >= 0 {
			continue // split above
		}
		for ch := range g.C {
			src := img[ch*hw : (ch+1)*hw]
			out := dst[(p*g.C+ch)*plane : (p*g.C+ch+1)*plane]
			for i := range c.hs {
				row := out[i*c.ws : (i+1)*c.ws]
				r := ph[0] + g.StrideH*i
				if r >= g.H {
					clear(row)
					continue
				}
				for j := range row {
					if s := ph[1] + g.StrideW*j; s < g.W {
						row[j] = src[r*g.W+s]
					} else {
						row[j] = 0
					}
				}
			}
		}
	}
}

// mergeImage writes every phase of dx, computed into ph (phase after
// phase in c.bwd's order, each C planes of its rows x cols), into the
// image img (C planes of H x W).
func mergeImage[T float32 | uint16](c *Conv, img, ph []T) {
	g := c.g
	hw := g.H * g.W
	_ = img[g.C*hw-1]
	offs := make([]int, len(c.bwd))
	off := 0
	for i, p := range c.bwd {
		offs[i] = off
		off += g.C * p.rows * p.cols
	}
	_ = ph[off-1]
	if directConv && g.StrideH == 2 && g.StrideW == 2 && g.W%2 == 0 {
		// c.bwd is in (a, b) order: (0,0), (0,1), (1,0), (1,1), those
		// that exist.
		for a := 0; a < 2 && 2*a < len(c.bwd); a++ {
			i0, i1 := 2*a, 2*a+1
			p := c.bwd[i0]
			ld := p.rows * p.cols
			for ch := range g.C {
				s0, s1 := ph[offs[i0]+ch*ld:], ph[offs[i1]+ch*ld:]
				var z T
				switch any(z).(type) {
				case float32:
					mergeRowsF32(ptr(img, ch*hw+a*g.W), 2*g.W, ptr(s0, 0), ptr(s1, 0), p.cols, p.rows, g.W)
				default:
					mergeRows16(ptr(img, ch*hw+a*g.W), 2*g.W, ptr(s0, 0), ptr(s1, 0), p.cols, p.rows, g.W)
				}
			}
		}
		return
	}
	for i, p := range c.bwd {
		ld := p.rows * p.cols
		for ch := range g.C {
			pl := ph[offs[i]+ch*ld : offs[i]+(ch+1)*ld]
			plane := img[ch*hw : (ch+1)*hw]
			for r := range p.rows {
				row := plane[(p.a+g.StrideH*r)*g.W:]
				for j, v := range pl[r*p.cols : (r+1)*p.cols] {
					row[p.b+g.StrideW*j] = v
				}
			}
		}
	}
}
