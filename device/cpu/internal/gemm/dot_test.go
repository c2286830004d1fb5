package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// variant is a way Gemm can run: an implementation made active, with the
// bfloat16 dot path on or off. With dot on, only products of two bfloat16
// operands behave differently.
type variant struct {
	name string
	im   *impl
	dot  bool
}

// use makes v the way Gemm runs for the rest of the test.
func (v variant) use(t testing.TB) {
	withImpl(t, v.im)
	prev := bf16Dot
	bf16Dot = dotOff
	if v.dot {
		bf16Dot = dotOn
	}
	t.Cleanup(func() { bf16Dot = prev })
}

// variants lists every implementation with the dot path forced off, then
// every dot path this CPU has, then goDotHost, which runs the pair packing
// and a Go dot kernel on any CPU.
func variants() []variant {
	var vs []variant
	for _, im := range impls {
		vs = append(vs, variant{im.name, im, false})
	}
	for _, im := range impls {
		if im.dot != nil {
			vs = append(vs, variant{im.dot.name, im, true})
		}
	}
	vs = append(vs, moreDots...)
	return append(vs, variant{goDotImpl.name, goDotHost, true})
}

// moreDots are dot paths this CPU has beside the ones impls use: the
// VDPBF16PS kernels on a CPU whose BF16 products go to AMX. A platform
// test file fills it.
var moreDots []variant

// kernelImpls lists every implementation whose kernels can be called:
// impls, and the dot variants this CPU has, and the Go one.
func kernelImpls() []*impl {
	ks := append([]*impl(nil), impls...)
	for _, im := range impls {
		if im.dot != nil {
			ks = append(ks, im.dot)
		}
	}
	for _, v := range moreDots {
		ks = append(ks, v.im.dot)
	}
	return append(ks, goDotImpl)
}

// goDotImpl is a Go model of a dot implementation: bfloat16 pairs packed by
// zipGo and trPairsGo, multiplied by a 4x4 tile that adds a pair's two
// products one after the other. Its bits need not match VDPBF16PS's; it lets
// the pair packing and blocking be tested on CPUs without AVX512_BF16.
// goDotHost is the goImpl that switches to it.
var (
	goDotImpl = &impl{
		name: "go-bf16dot",
		mr:   4, nr: 4,
		kc: 512, mc: 128, nc: 2048,
		pairs:   true,
		tile:    tileDotGo,
		zip:     zipGo,
		trPairs: trPairsGo,
	}
	goDotHost = func() *impl {
		c := *goImpl
		c.name = "go-with-bf16dot"
		c.dot = goDotImpl
		return &c
	}()
)

// tileDotGo is tileGo over panels of bfloat16 pairs. A bfloat16 product is
// exact in float32, so every rounding is one of the additions.
func tileDotGo(kc int, a, b, c []float32, ldc int, alpha, beta float32) {
	aw, bw := words(a[:4*kc]), words(b[:4*kc])
	var t [16]float32
	for s := 0; s < kc; s++ {
		for i := range 4 {
			x := aw[s*4+i]
			for j := range 4 {
				y := bw[s*4+j]
				acc := t[i*4+j]
				acc += float32(bf16ToF32(uint16(x)) * bf16ToF32(uint16(y)))
				acc += float32(bf16ToF32(uint16(x>>16)) * bf16ToF32(uint16(y>>16)))
				t[i*4+j] = acc
			}
		}
	}
	mergeTile(c, ldc, t[:], 4, 4, 4, alpha, beta)
}

// fillPanel fills a packed panel with values in [-1, 1]: float32 for the
// widening kernels, pairs of bfloat16 for the dot ones (random float32 bits
// would make NaNs and subnormals of their low halves).
func fillPanel(rng *rand.Rand, im *impl, s []float32) {
	for i := range s {
		if !im.pairs {
			s[i] = rng.Float32()*2 - 1
			continue
		}
		lo := math.Float32bits(rng.Float32()*2-1) >> 16
		hi := math.Float32bits(rng.Float32()*2-1) >> 16
		words(s[i : i+1])[0] = lo | hi<<16
	}
}

// TestBF16DotChosen checks which implementation multiplies which operands:
// the dot variant exactly when both are bfloat16 and bf16Dot lets it (on,
// or auto where the variant pays).
func TestBF16DotChosen(t *testing.T) {
	host := *goDotHost
	dot := *goDotImpl
	host.dot = &dot
	withImpl(t, &host)
	bf := Operand{U16: []uint16{0}, BF16: true, LD: 1}
	f16 := Operand{U16: []uint16{0}, LD: 1}
	f := Operand{F32: []float32{0}, LD: 1}
	yes := func() bool { return true }
	no := func() bool { return false }
	tests := []struct {
		a, b Operand
		mode dotMode
		pays func() bool
		want *impl
	}{
		{bf, bf, dotOn, nil, &dot},
		{bf, bf, dotOn, no, &dot},
		{bf, bf, dotAuto, nil, &dot},
		{bf, bf, dotAuto, yes, &dot},
		{bf, bf, dotAuto, no, &host},
		{bf, bf, dotOff, yes, &host},
		{bf, f, dotOn, nil, &host},
		{f, bf, dotOn, nil, &host},
		{bf, f16, dotOn, nil, &host},
		{f16, f16, dotOn, nil, &host},
		{f16, f16, dotAuto, yes, &host},
	}
	for _, tt := range tests {
		prev := bf16Dot
		bf16Dot = tt.mode
		dot.pays = tt.pays
		got := implFor(&tt.a, &tt.b)
		bf16Dot = prev
		if got != tt.want {
			t.Errorf("implFor(BF16 %v/%v, BF16 %v/%v) with mode %d, pays %v = %s, want %s",
				tt.a.BF16, tt.a.U16 != nil, tt.b.BF16, tt.b.U16 != nil, tt.mode, tt.pays != nil && tt.pays(), got.name, tt.want.name)
		}
	}
}

// TestDotModeFrom checks the environment's two switches: MIXPREC_NO_BF16DOT=1
// wins, MIXPREC_BF16DOT=1 forces the dot path, anything else leaves it to
// the CPU.
func TestDotModeFrom(t *testing.T) {
	for _, tt := range []struct {
		no, yes string
		want    dotMode
	}{
		{"", "", dotAuto}, {"0", "0", dotAuto}, {"1", "", dotOff}, {"1", "1", dotOff},
		{"", "1", dotOn}, {"0", "1", dotOn}, {"yes", "true", dotAuto},
	} {
		if got := dotModeFrom(tt.no, tt.yes); got != tt.want {
			t.Errorf("dotModeFrom(%q, %q) = %d, want %d", tt.no, tt.yes, got, tt.want)
		}
	}
}

// TestGemmBF16DotAgrees runs every shape the other Gemm tests use, in
// bfloat16, with each dot path on and forced off, and requires both to be
// within tolerance of the exact product and of each other. Products of
// bfloat16 values are exact in float32, so the dot path's error is the
// accumulation's, which the float32 tolerance bounds.
func TestGemmBF16DotAgrees(t *testing.T) {
	shapes := append([][3]int(nil), gemmShapes()...)
	// The block tests' shapes, and an odd k past two 512-k blocks.
	shapes = append(shapes, [3]int{37, 101, 29}, [3]int{40, 50, 60}, [3]int{3, 3, 300}, [3]int{29, 45, 1027})
	if !testing.Short() {
		shapes = append(shapes, [3]int{128, 256, 784}, [3]int{256, 784, 128}, [3]int{64, 576, 288})
	}
	for _, v := range variants() {
		if !v.dot {
			continue
		}
		for _, tr := range transCombos {
			for si, s := range shapes {
				tc := gemmCase{transA: tr.a, transB: tr.b, sa: bf16, sb: bf16,
					m: s[0], n: s[1], k: s[2],
					alpha: []float32{1, -0.75, 2.5}[si%3], beta: []float32{0, 1, -1.5, 0.5}[si%4],
					ldExtra: si % 3 * 5, off: si%4*3 + si%2}
				t.Run(v.name+"/"+tc.String(), func(t *testing.T) {
					v.use(t)
					dot := tc.run(t, uint64(si))
					bf16Dot = dotOff
					wide := tc.run(t, uint64(si))
					// |a|, |b|, |c| <= 1 bound the magnitude.
					mag := math.Abs(float64(tc.alpha))*float64(tc.k) + math.Abs(float64(tc.beta))
					ldc := max(1, tc.n+tc.ldExtra)
					for i := range tc.m {
						for j := range tc.n {
							x, y := dot[i*ldc+j], wide[i*ldc+j]
							if d := math.Abs(float64(x - y)); !(d <= 2*tolerance(tc.k, mag)) {
								t.Fatalf("C[%d,%d]: dot path %v, widening path %v", i, j, x, y)
							}
						}
					}
				})
			}
		}
	}
}

// TestBF16DotOddK checks the zero that pairs an odd k's last value and
// that packing reads nothing past the matrices: their rows are padded with
// NaNs, which would reach C if a pair took its second value from there. Row 0
// of op(A) ends in +Inf, which must come out +Inf (Inf·1 + 0·0), not NaN.
func TestBF16DotOddK(t *testing.T) {
	const (
		one, two, inf = 0x3f80, 0x4000, 0x7f80 // bfloat16 1, 2, +Inf
		nan           = 0x7fc1
	)
	for _, v := range variants() {
		if !v.dot {
			continue
		}
		for _, tr := range transCombos {
			for _, k := range []int{1, 3, 7, 513, 1025} {
				t.Run(fmt.Sprintf("%s/%v%v/k=%d", v.name, tr.a, tr.b, k), func(t *testing.T) {
					v.use(t)
					const m, n = 13, 35
					// op(A) is all ones but its last column is 2, op(B)
					// all ones, so C is k+1, and +Inf in row 0.
					ar, ac, br, bc := m, k, k, n
					if tr.a {
						ar, ac = k, m
					}
					if tr.b {
						br, bc = n, k
					}
					a := make([]uint16, ar*(ac+1))
					b := make([]uint16, br*(bc+1))
					for x := range a {
						a[x] = one
						if x%(ac+1) == ac {
							a[x] = nan
						}
					}
					for x := range b {
						b[x] = one
						if x%(bc+1) == bc {
							b[x] = nan
						}
					}
					at := func(i, p int) int {
						if tr.a {
							return p*(ac+1) + i
						}
						return i*(ac+1) + p
					}
					for i := range m {
						a[at(i, k-1)] = two
					}
					a[at(0, k-1)] = inf
					c := make([]float32, m*n)
					Gemm(tr.a, tr.b, m, n, k, 1, Operand{U16: a, BF16: true, LD: ac + 1}, Operand{U16: b, BF16: true, LD: bc + 1}, 0, c, n)
					for i := range m {
						for j := range n {
							want := float32(k + 1)
							if i == 0 {
								want = float32(math.Inf(1))
							}
							if got := c[i*n+j]; got != want {
								t.Fatalf("C[%d,%d] = %v, want %v", i, j, got, want)
							}
						}
					}
				})
			}
		}
	}
}

// TestPairPackers compares the assembly pair packers with the Go ones bit
// for bit, on blocks that exercise every width of their loops, with odd
// leading dimensions (pairs straddling 32-bit boundaries) and a sentinel
// around dst to catch stray writes.
func TestPairPackers(t *testing.T) {
	var asm []*impl
	for _, im := range kernelImpls() {
		if im.pairs && im != goDotImpl {
			asm = append(asm, im)
		}
	}
	if len(asm) == 0 {
		t.Skip("no assembly dot implementation on this CPU")
	}
	const sentry = 0x7fc0beef
	rng := rand.New(rand.NewPCG(8, 9))
	for _, im := range asm {
		for _, rows := range []int{1, 3, 4, 7, 8, 12, 13, 32} {
			for _, cols := range []int{1, 2, 3, 4, 5, 8, 9, 16, 17, 31, 33} {
				lds := cols*2 + rng.IntN(3)
				src := make([]uint16, rows*lds*2+8)
				for i := range src {
					src[i] = uint16(rng.Uint32())
				}
				ldd := max(rows, cols) + 1
				fresh := func() []float32 {
					d := make([]float32, ldd*max(rows, cols)+5)
					for i := range d {
						words(d[i : i+1])[0] = sentry
					}
					return d
				}
				t.Run(fmt.Sprintf("%s/zip/%dx%d", im.name, rows, cols), func(t *testing.T) {
					got, want := fresh(), fresh()
					im.zip(got, ldd, src[1:], lds, rows, cols)
					zipGo(want, ldd, src[1:], lds, rows, cols)
					compareWords(t, got, want)
				})
				t.Run(fmt.Sprintf("%s/trPairs/%dx%d", im.name, rows, cols), func(t *testing.T) {
					got, want := fresh(), fresh()
					im.trPairs(got, ldd, src[1:], lds, rows, cols)
					trPairsGo(want, ldd, src[1:], lds, rows, cols)
					compareWords(t, got, want)
				})
			}
		}
	}
}

func compareWords(t *testing.T, got, want []float32) {
	t.Helper()
	g, w := words(got), words(want)
	for i := range w {
		if g[i] != w[i] {
			t.Fatalf("word %d = %#x, want %#x", i, g[i], w[i])
		}
	}
}
