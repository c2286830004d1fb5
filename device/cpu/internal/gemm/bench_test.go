package gemm

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// benchShape is a product the framework runs often.
type benchShape struct {
	name           string
	transA, transB bool
	m, n, k        int
}

// benchShapes are MLP training at batch 128 (784-256 layer: forward x·Wᵀ,
// backward dX = dY·W and dW = dYᵀ·X, and the other transpose combinations;
// the same three for the 256-128 and 128-10 layers),
// one image of a 3x3 convolution as GEMM (64 filters, 32 channels, 24x24
// output) with its two backward products, a wide layer, and squares.
var benchShapes = []benchShape{
	{"mlp-fwd-NT-128x256x784", false, true, 128, 256, 784},
	{"mlp-NN-128x256x784", false, false, 128, 256, 784},
	{"mlp-TN-128x256x784", true, false, 128, 256, 784},
	{"mlp-TT-128x256x784", true, true, 128, 256, 784},
	{"mlp-dX-NN-128x784x256", false, false, 128, 784, 256},
	{"mlp-dW-TN-256x784x128", true, false, 256, 784, 128},
	{"mlp2-fwd-NT-128x128x256", false, true, 128, 128, 256},
	{"mlp2-dX-NN-128x256x128", false, false, 128, 256, 128},
	{"mlp2-dW-TN-128x256x128", true, false, 128, 256, 128},
	{"mlp3-fwd-NT-128x10x128", false, true, 128, 10, 128},
	{"mlp3-dX-NN-128x128x10", false, false, 128, 128, 10},
	{"mlp3-dW-TN-10x128x128", true, false, 10, 128, 128},
	{"conv-fwd-NN-64x576x288", false, false, 64, 576, 288},
	{"conv-dW-NT-64x288x576", false, true, 64, 288, 576},
	{"conv-dX-TN-288x576x64", true, false, 288, 576, 64},
	{"wide-NT-512x4096x4096", false, true, 512, 4096, 4096},
	{"square-NN-1024", false, false, 1024, 1024, 1024},
	{"square-NN-4096", false, false, 4096, 4096, 4096},
}

// benchOperand returns a rows x cols operand of random values in storage st.
func benchOperand(rng *rand.Rand, st storage, rows, cols int) Operand {
	op, _ := newOperand(rng, st, rows, cols, 0, 0)
	return op
}

// operands returns s's A and B, random values stored in st, the same on
// every call.
func (s benchShape) operands(st storage) (a, b Operand) {
	rng := rand.New(rand.NewPCG(1, 1))
	ar, ac := stored(s.transA, s.m, s.k)
	br, bc := stored(s.transB, s.k, s.n)
	return benchOperand(rng, st, ar, ac), benchOperand(rng, st, br, bc)
}

func reportGFLOPS(b *testing.B, m, n, k int) float64 {
	gf := 2 * float64(m) * float64(n) * float64(k) * float64(b.N) / b.Elapsed().Seconds() / 1e9
	b.ReportMetric(gf, "GFLOP/s")
	return gf
}

// BenchmarkGemm reports GFLOP/s for each shape with A and B both stored as
// F32, F16 or BF16. On the square 1024 shape it also reports the fraction of
// the measured FMA peak of the cores it may use (see BenchmarkPeak). For the
// single-core figures set GOMAXPROCS=1 in the environment rather than passing
// -cpu 1: with -cpu 1,2 and -count, the first -cpu 1 run of a benchmark has
// been seen to run with GOMAXPROCS 2.
func BenchmarkGemm(b *testing.B) {
	for _, s := range benchShapes {
		for _, st := range storages {
			b.Run(fmt.Sprintf("%s/%s", s.name, st), func(b *testing.B) {
				a, bb := s.operands(st)
				c := make([]float32, s.m*s.n)
				Gemm(s.transA, s.transB, s.m, s.n, s.k, 1, a, bb, 0, c, s.n) // warm the pool
				cpu := startCPU()
				for b.Loop() {
					Gemm(s.transA, s.transB, s.m, s.n, s.k, 1, a, bb, 0, c, s.n)
				}
				gf := reportGFLOPS(b, s.m, s.n, s.k)
				cpu.report(b, 2*float64(s.m)*float64(s.n)*float64(s.k))
				if s.name == "square-NN-1024" {
					peak := corePeak()
					if implFor(&a, &bb).pairs {
						peak = dotPeak()
					}
					if peak > 0 {
						cores := min(runtime.GOMAXPROCS(0), runtime.NumCPU())
						b.ReportMetric(gf/(peak*float64(cores)), "of-peak")
					}
				}
			})
		}
	}
}

// BenchmarkGemm16 compares a 16-bit C with a float32 one on the MLP's and
// the convolution's products, the operands stored as C is (F32 with F32, F16
// with F16, BF16 with BF16), as in an autocast training step. A 16-bit C
// should cost about what a float32 one does: its rounding is done tile by
// tile while the tile is in L1.
func BenchmarkGemm16(b *testing.B) {
	for _, s := range benchShapes {
		if s.m*s.n > 1<<20 {
			continue // the wide and square shapes: C's store is a small part
		}
		for _, st := range storages {
			b.Run(fmt.Sprintf("%s/%s", s.name, st), func(b *testing.B) {
				a, bb := s.operands(st)
				c := make([]float32, s.m*s.n)
				out := Out16{U16: make([]uint16, s.m*s.n), BF16: st == bf16, LD: s.n}
				run := func() {
					if st == f32 {
						Gemm(s.transA, s.transB, s.m, s.n, s.k, 1, a, bb, 0, c, s.n)
						return
					}
					Gemm16(s.transA, s.transB, s.m, s.n, s.k, 1, a, bb, 0, out)
				}
				run() // warm the pool
				for b.Loop() {
					run()
				}
				reportGFLOPS(b, s.m, s.n, s.k)
			})
		}
	}
}

// BenchmarkGonumSgemm runs the same shapes through gonum's pure-Go Sgemm
// (float32 only), the baseline this package must beat.
func BenchmarkGonumSgemm(b *testing.B) {
	impl := gonum.Implementation{}
	for _, s := range benchShapes {
		b.Run(s.name+"/F32", func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 1))
			a := make([]float32, s.m*s.k)
			bb := make([]float32, s.k*s.n)
			for i := range a {
				a[i] = rng.Float32()
			}
			for i := range bb {
				bb[i] = rng.Float32()
			}
			lda, ldb := s.k, s.n
			ta, tb := blas.NoTrans, blas.NoTrans
			if s.transA {
				ta, lda = blas.Trans, s.m
			}
			if s.transB {
				tb, ldb = blas.Trans, s.k
			}
			c := make([]float32, s.m*s.n)
			for b.Loop() {
				impl.Sgemm(ta, tb, s.m, s.n, s.k, 1, a, lda, bb, ldb, 0, c, s.n)
			}
			reportGFLOPS(b, s.m, s.n, s.k)
		})
	}
}

// BenchmarkSmall shows the cost of small products, where packing and call
// overhead dominate.
func BenchmarkSmall(b *testing.B) {
	for _, n := range []int{4, 8, 16, 32, 64} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			a := make([]float32, n*n)
			bb := make([]float32, n*n)
			c := make([]float32, n*n)
			for b.Loop() {
				Sgemm(false, false, n, n, n, 1, a, n, bb, n, 0, c, n)
			}
			reportGFLOPS(b, n, n, n)
		})
	}
}

// BenchmarkPeak reports one core's measured FMA throughput for each kernel's
// instruction set: independent FMA chains with no loads, the ceiling no
// GEMM on this core can pass.
func BenchmarkPeak(b *testing.B) {
	for _, p := range peakLoops() {
		b.Run(p.name, func(b *testing.B) {
			const iters = 1 << 16
			for b.Loop() {
				p.run(iters)
			}
			b.ReportMetric(float64(p.flops)*iters*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// measurePeak returns the best of 20 runs of the last of peakLoops for
// which keep is true, in GFLOP/s, or 0 when there is none.
func measurePeak(keep func(peakLoop) bool) float64 {
	var p *peakLoop
	for _, l := range peakLoops() {
		if keep(l) {
			p = &l
		}
	}
	if p == nil {
		return 0
	}
	best := 0.0
	for range 20 {
		const iters = 1 << 18
		start := time.Now()
		p.run(iters)
		best = max(best, float64(p.flops)*iters/time.Since(start).Seconds()/1e9)
	}
	return best
}

var (
	corePeakOnce = sync.OnceValue(func() float64 { return measurePeak(func(l peakLoop) bool { return !l.dot }) })
	dotPeakOnce  = sync.OnceValue(func() float64 { return measurePeak(func(l peakLoop) bool { return l.dot }) })
)

// corePeak is one core's measured FMA peak in GFLOP/s for the widest kernel's
// instruction set, or 0 where there is no assembly.
func corePeak() float64 { return corePeakOnce() }

// dotPeak is one core's measured VDPBF16PS peak in GFLOP/s, or 0 where the
// CPU has no AVX512_BF16.
func dotPeak() float64 { return dotPeakOnce() }

// BenchmarkImpl runs one MLP shape through every implementation this CPU
// has, the fastest being the one Gemm uses: the AVX2 figures show what a CPU
// without AVX-512 gets, the Go ones what other architectures get.
func BenchmarkImpl(b *testing.B) {
	s := benchShapes[0]
	for _, im := range impls {
		for _, st := range []storage{f32, f16} {
			b.Run(fmt.Sprintf("%s/%s/%s", im.name, s.name, st), func(b *testing.B) {
				withImpl(b, im)
				rng := rand.New(rand.NewPCG(1, 1))
				a := benchOperand(rng, st, s.m, s.k)
				bb := benchOperand(rng, st, s.n, s.k)
				c := make([]float32, s.m*s.n)
				for b.Loop() {
					Gemm(s.transA, s.transB, s.m, s.n, s.k, 1, a, bb, 0, c, s.n)
				}
				reportGFLOPS(b, s.m, s.n, s.k)
			})
		}
	}
}

// BenchmarkTile measures each micro-kernel alone on packed panels that stay
// in L1, with C resident too: the ceiling the blocking can approach. kc
// counts k values; a dot kernel takes them in kc/2 pair steps.
func BenchmarkTile(b *testing.B) {
	for _, im := range kernelImpls() {
		for _, kc := range []int{64, 256} {
			b.Run(fmt.Sprintf("%s/kc=%d", im.name, kc), func(b *testing.B) {
				steps := kc
				if im.pairs {
					steps = kc / 2
				}
				a := make([]float32, steps*im.mr)
				bb := make([]float32, steps*im.nr)
				c := make([]float32, im.mr*im.nr)
				for b.Loop() {
					im.tile(steps, a, bb, c, im.nr, 1, 1)
				}
				b.ReportMetric(2*float64(im.mr*im.nr*kc)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkGemmBatch runs a convolution chunk's products as one batch
// (GemmBatch) and one product after another (Gemm per image), for as many
// images as a chunk holds in float32 and in bfloat16 on a 1 MiB L2 (3 and
// 6): the forward and input-gradient products, the filters shared and
// each image's columns and output its own, and the weight gradient, each
// image adding its product onto the one C.
func BenchmarkGemmBatch(b *testing.B) {
	shapes := []benchShape{
		{"conv-fwd-NN-64x576x288", false, false, 64, 576, 288},
		{"conv-dX-TN-288x576x64", true, false, 288, 576, 64},
		{"conv-dW-NT-64x288x576", false, true, 64, 288, 576}, // each image adds onto one C
	}
	for _, s := range shapes {
		for _, st := range []storage{f32, bf16} {
			for _, count := range []int{3, 6} {
				for _, mode := range []string{"batch", "loop"} {
					b.Run(fmt.Sprintf("%s/%s/x%d/%s", s.name, st, count, mode), func(b *testing.B) {
						rng := rand.New(rand.NewPCG(1, 1))
						ar, ac := stored(s.transA, s.m, s.k)
						br, bc := stored(s.transB, s.k, s.n)
						accum := s.transB // the weight gradient: dy[i] and col[i] per image, one C
						na := 1
						if accum {
							na = count
						}
						a := benchOperand(rng, st, na*ar, ac)
						bb := benchOperand(rng, st, count*br, bc)
						c := make([]float32, count*s.m*s.n)
						bt := Batch{Count: count, StrideB: br * bc, StrideC: s.m * s.n}
						beta := float32(0)
						if accum {
							bt.StrideA, bt.StrideC, beta = ar*ac, 0, 1
						}
						run := func() {
							if mode == "batch" {
								GemmBatch(s.transA, s.transB, s.m, s.n, s.k, 1, a, bb, beta, c, s.n, bt)
								return
							}
							for i := range count {
								ai, bi := bt.at(i, a, bb)
								Gemm(s.transA, s.transB, s.m, s.n, s.k, 1, ai, bi, beta, c[i*bt.StrideC:], s.n)
							}
						}
						run()
						for b.Loop() {
							run()
						}
						reportGFLOPS(b, count*s.m, s.n, s.k)
					})
				}
			}
		}
	}
}
