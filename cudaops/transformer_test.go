package cudaops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/dtype"
)

// TestTransformerAgainstCPU compares the transformer kernels on the GPU with
// the CPU backend's, at shapes of several tiles (the conformance suite
// checks both against float64 references at smaller ones).
func TestTransformerAgainstCPU(t *testing.T) {
	compareTransformer(t, openGPU(t), true)
}

// TestEmulatedTransformerAgainstCPU runs the comparison on the fake device,
// at shapes its emulation runs in a moment.
func TestEmulatedTransformerAgainstCPU(t *testing.T) {
	d, _ := newFakeDevice(Options{})
	compareTransformer(t, d, false)
}

func compareTransformer(t *testing.T, dev device.Device, big bool) {
	for _, g := range []struct {
		name string
		fn   func(c *cmp, big bool)
	}{
		{"Embedding", cmpEmbedding}, {"Softmax", cmpRowSoftmax}, {"LayerNorm", cmpLayerNorm}, {"Attention", cmpAttention},
	} {
		t.Run(g.name, func(t *testing.T) {
			c := &cmp{t: t, cpu: cpu.New(), dev: dev, rng: rand.New(rand.NewPCG(uint64(len(g.name)), 0x7466))}
			defer c.release()
			g.fn(c, big)
		})
	}
}

// tk is the device's transformer kernels.
func tk(d device.Device) device.TransformerKernels { return d.(device.TransformerKernels) }

// cmpEmbedding: the gather moves values, and the scatter-add sums each
// table row's dy rows in order of i in float32 and rounds once on both
// backends, so both must match the CPU bit for bit.
func cmpEmbedding(c *cmp, big bool) {
	n, dim, vocab := 300, 70, 40
	if big {
		n, dim, vocab = 2000, 300, 70 // two strips of columns, three blocks of rows
	}
	ids := make([]float32, n)
	for i := range ids {
		ids[i] = float32(c.rng.IntN(vocab))
	}
	for _, ty := range combos(1) {
		ib := c.put(dtype.F32, ids)
		table := c.put(ty[1], c.uniform(vocab*dim, -2, 2))
		dst := c.out(ty[0], n*dim)
		tk(c.cpu).Embedding(dst[0], table[0], ib[0], n, dim)
		tk(c.dev).Embedding(dst[1], table[1], ib[1], n, dim)
		c.exact("Embedding/"+name(ty), dst)

		dy := c.put(ty[1], c.uniform(n*dim, -1, 1))
		dtab := c.out(ty[0], vocab*dim)
		tk(c.cpu).EmbeddingGrad(dtab[0], dy[0], ib[0], n, dim)
		tk(c.dev).EmbeddingGrad(dtab[1], dy[1], ib[1], n, dim)
		c.exact("EmbeddingGrad/"+name(ty), dtab)
	}
}

func cmpRowSoftmax(c *cmp, big bool) {
	rows, cols := 40, 77
	if big {
		rows, cols = 300, 1000
	}
	for _, ty := range combos(2) {
		x := c.put(ty[1], c.uniform(rows*cols, -8, 8))
		y := c.out(ty[0], rows*cols)
		tk(c.cpu).Softmax(y[0], x[0], rows, cols)
		tk(c.dev).Softmax(y[1], x[1], rows, cols)
		c.near("Softmax/"+name(ty), y, nil)

		// SoftmaxGrad on the CPU's output, rounded to the third dtype.
		yv := c.host(y[0], c.cpu)
		yb, dy := c.put(ty[2], yv), c.put(ty[1], c.uniform(rows*cols, -1, 1))
		dx := c.out(ty[0], rows*cols)
		tk(c.cpu).SoftmaxGrad(dx[0], dy[0], yb[0], rows, cols)
		tk(c.dev).SoftmaxGrad(dx[1], dy[1], yb[1], rows, cols)
		// sum(dy*y) is a float32 sum on the GPU, float64 on the CPU; each
		// term is below |y|, and the sum's error is multiplied by y.
		c.near("SoftmaxGrad/"+name(ty), dx, func(i int) float64 { return math.Abs(float64(yv[i])) * sumSlack(cols, 1) })
	}
}

func cmpLayerNorm(c *cmp, big bool) {
	rows, cols := 37, 70
	if big {
		rows, cols = 1030, 768
	}
	for _, ty := range combos(2) {
		for _, bias := range []bool{true, false} {
			what := fmt.Sprintf("%s/bias=%v", name(ty), bias)
			x := c.put(ty[1], c.uniform(rows*cols, 3, 5))
			w, b := c.put(dtype.F32, c.uniform(cols, 0.5, 1.5)), c.put(dtype.F32, c.uniform(cols, -1, 1))
			var bb [2]device.Buffer
			if bias {
				bb = b
			}
			// x̂ is kept in ty[2], dy's dtype, as autocast keeps it in the
			// output's when that is 16-bit.
			y, xhat, rstd := c.out(ty[0], rows*cols), c.out(ty[2], rows*cols), c.out(dtype.F32, rows)
			tk(c.cpu).LayerNorm(y[0], xhat[0], rstd[0], x[0], w[0], bb[0], rows, cols, 1e-5)
			tk(c.dev).LayerNorm(y[1], xhat[1], rstd[1], x[1], w[1], bb[1], rows, cols, 1e-5)
			c.near("LayerNorm/y/"+what, y, nil)
			c.near("LayerNorm/xhat/"+what, xhat, nil)
			c.near("LayerNorm/rstd/"+what, rstd, nil)

			// Both backward passes read the CPU's x̂ and rstd.
			xhat, rstd = c.put(ty[2], c.host(xhat[0], c.cpu)), c.put(dtype.F32, c.host(rstd[0], c.cpu))
			dy := c.put(ty[2], c.uniform(rows*cols, -1, 1))
			dx, dw, db := c.out(ty[0], rows*cols), c.out(dtype.F32, cols), c.out(dtype.F32, cols)
			var dbb [2]device.Buffer
			if bias {
				dbb = db
			}
			tk(c.cpu).LayerNormGrad(dx[0], dw[0], dbb[0], dy[0], xhat[0], rstd[0], w[0], rows, cols)
			tk(c.dev).LayerNormGrad(dx[1], dw[1], dbb[1], dy[1], xhat[1], rstd[1], w[1], rows, cols)
			// The rows' means of g = dy*w and g*xhat: float32 sums of cols
			// terms on both, in different orders, with |g| < 1.5 and |xhat|
			// < 1.8 here; dx multiplies them by rstd < 1.8 and 1 + |xhat|.
			c.near("LayerNormGrad/dx/"+what, dx, func(int) float64 { return 5 * sumSlack(cols, 5*float64(cols)) / float64(cols) })
			// The columns' sums over rows: float32 runs of rows/32 terms on
			// the GPU, of up to 8192/cols on the CPU.
			c.near("LayerNormGrad/dw/"+what, dw, func(int) float64 { return sumSlack(rows, 2*float64(rows)) })
			if bias {
				c.near("LayerNormGrad/db/"+what, db, func(int) float64 { return sumSlack(rows, float64(rows)) })
			}
		}
	}
}

// cmpAttention compares forward and backward in F32, where the two
// backends differ only in the order of their float32 sums; the 16-bit
// paths, whose roundings of the probabilities amplify those differences,
// are checked against float64 in the conformance suite.
func cmpAttention(c *cmp, big bool) {
	cases := []device.AttentionParams{
		{B: 2, T: 37, H: 2, D: 16, Causal: true, Dropout: 0.2, Key: device.RandKey{Seed: 3, Offset: 5}},
		{B: 1, T: 45, H: 1, D: 40},
	}
	if big {
		cases = []device.AttentionParams{
			{B: 2, T: 257, H: 3, D: 64, Causal: true, Dropout: 0.1, Key: device.RandKey{Seed: 7, Offset: 1 << 40}},
			{B: 1, T: 100, H: 2, D: 128},
			{B: 3, T: 70, H: 2, D: 100, Causal: true},
			{B: 1, T: 300, H: 1, D: 33, Causal: true, Dropout: 0.5, Key: device.RandKey{Seed: 11}},
		}
	}
	for _, p := range cases {
		p.Scale = float32(1 / math.Sqrt(float64(p.D)))
		what := fmt.Sprintf("B%d_T%d_H%d_D%d_causal=%v_drop=%v", p.B, p.T, p.H, p.D, p.Causal, p.Dropout)
		qkv := c.put(dtype.F32, c.uniform(p.QKV(), -2, 2))
		y, lse := c.out(dtype.F32, p.Out()), c.out(dtype.F32, p.Rows())
		tk(c.cpu).Attention(y[0], lse[0], qkv[0], p)
		tk(c.dev).Attention(y[1], lse[1], qkv[1], p)
		// The float32 sums of the two backends (scores over D, the
		// softmax's over T, the products with v and dy) differ in order;
		// on the fake device the largest difference was under 5% of F32's
		// tolerance at these shapes, forward and backward, so none is added.
		c.near("Attention/y/"+what, y, nil)
		c.near("Attention/lse/"+what, lse, nil)

		// Both backward passes read the CPU's y and lse.
		y, lse = c.put(dtype.F32, c.host(y[0], c.cpu)), c.put(dtype.F32, c.host(lse[0], c.cpu))
		dy := c.put(dtype.F32, c.uniform(p.Out(), -1, 1))
		dqkv := c.out(dtype.F32, p.QKV())
		tk(c.cpu).AttentionGrad(dqkv[0], dy[0], qkv[0], y[0], lse[0], p)
		tk(c.dev).AttentionGrad(dqkv[1], dy[1], qkv[1], y[1], lse[1], p)
		c.near("AttentionGrad/"+what, dqkv, nil)
	}
}

// TestTransformerPanics checks the Go side's argument checks on the fake
// device: the CPU's panics, and the attention kernels' head-size limit.
func TestTransformerPanics(t *testing.T) {
	d, _ := newFakeDevice(Options{})
	alloc := func(dt dtype.DType, v ...float32) device.Buffer {
		b := d.Alloc(dt, len(v), device.Temp)
		d.CopyFromHost(b, v)
		return b
	}
	zeros := func(dt dtype.DType, n int) device.Buffer { return alloc(dt, make([]float32, n)...) }
	p := device.AttentionParams{B: 1, T: 2, H: 1, D: AttentionMaxD + 1, Scale: 1}
	big := zeros(dtype.F32, p.QKV())
	bigY, bigL := zeros(dtype.F32, p.Out()), zeros(dtype.F32, p.Rows())
	p2 := p
	p2.D = 4
	qkv, y, lse := zeros(dtype.F32, p2.QKV()), zeros(dtype.F32, p2.Out()), zeros(dtype.F32, p2.Rows())
	lse16, dy16 := zeros(dtype.F16, p2.Rows()), zeros(dtype.BF16, p2.Out())
	table, dtab := zeros(dtype.F32, 3*2), zeros(dtype.BF16, 3*2)
	x := zeros(dtype.F32, 4*3)
	w, rstd, rstd16 := zeros(dtype.F32, 3), zeros(dtype.F32, 4), zeros(dtype.BF16, 4)
	for _, c := range []struct {
		name, want string
		fn         func()
	}{
		{"Embedding/bad id", "Embedding: id 3 at 1 is not a row of a table of 3", func() {
			ids := alloc(dtype.F32, 0, 3)
			d.Embedding(zeros(dtype.F32, 4), table, ids, 2, 2)
		}},
		{"EmbeddingGrad/fraction", "EmbeddingGrad: id 1.5 at 2 is not a row of a table of 3", func() {
			ids := alloc(dtype.BF16, 2, 0, 1.5, -1)
			d.EmbeddingGrad(dtab, zeros(dtype.F32, 8), ids, 4, 2)
		}},
		{"EmbeddingGrad/short dy", "EmbeddingGrad: buffer of 3 elements, need 4", func() {
			d.EmbeddingGrad(dtab, zeros(dtype.F32, 3), alloc(dtype.F32, 0, 1), 2, 2)
		}},
		{"Softmax/short", "Softmax: buffer of 12 elements, need 15", func() { d.Softmax(x, x, 3, 5) }},
		{"LayerNorm/rstd bf16", "LayerNorm: rstd is bf16; want f32", func() {
			d.LayerNorm(x, x, rstd16, x, w, nil, 4, 3, 1e-5)
		}},
		{"LayerNorm/short xhat", "LayerNorm: buffer of 3 elements, need 12", func() {
			d.LayerNorm(x, w, rstd, x, w, nil, 4, 3, 1e-5)
		}},
		{"LayerNormGrad/dw bf16", "LayerNormGrad: rstd, dw and db must be f32", func() {
			d.LayerNormGrad(x, zeros(dtype.BF16, 3), nil, x, x, rstd, w, 4, 3)
		}},
		{"Attention/head size", "head size D=129 is more than the CUDA kernels' 128", func() { d.Attention(bigY, bigL, big, p) }},
		{"AttentionGrad/head size", "head size D=129 is more than the CUDA kernels' 128", func() {
			d.AttentionGrad(big, bigY, big, bigY, bigL, p)
		}},
		{"Attention/dropout 1", "Attention: invalid attention", func() {
			q := p2
			q.Dropout = 1
			d.Attention(y, lse, qkv, q)
		}},
		{"Attention/lse f16", "Attention: lse is f16; want f32", func() { d.Attention(y, lse16, qkv, p2) }},
		{"AttentionGrad/dy dtype", "AttentionGrad: dy is bf16, qkv f32; want one dtype", func() {
			d.AttentionGrad(qkv, dy16, qkv, y, lse, p2)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.Contains(s, c.want) {
					t.Errorf("panicked with %v; want a message containing %q", r, c.want)
				}
			}()
			c.fn()
		})
	}
}

// BenchmarkTransformerKernels times the attention and layer-norm kernels on
// the GPU at the character GPT's shape (12 sequences of 64, 4 heads of 32,
// C = 128) and at GPT-2 small's (8 of 1024, 12 heads of 64, C = 768),
// forward and backward, in F32 and BF16. Without a GPU it skips.
func BenchmarkTransformerKernels(b *testing.B) {
	dev, err := device.Open("cuda")
	if err != nil {
		b.Skipf("no GPU: %v", err)
	}
	d := dev.(*Device)
	for _, s := range []struct {
		name         string
		bs, t, h, dd int
	}{
		{"char", 12, 64, 4, 32},
		{"gpt2", 8, 1024, 12, 64},
	} {
		for _, dt := range []dtype.DType{dtype.F32, dtype.BF16} {
			p := device.AttentionParams{B: s.bs, T: s.t, H: s.h, D: s.dd, Scale: float32(1 / math.Sqrt(float64(s.dd))), Causal: true}
			rows, cols := s.bs*s.t, s.h*s.dd
			var bufs []device.Buffer
			alloc := func(dt dtype.DType, n int) device.Buffer {
				buf := d.Alloc(dt, n, device.Temp)
				d.Fill(buf, 0.01)
				bufs = append(bufs, buf)
				return buf
			}
			qkv, y, lse, dy, dqkv := alloc(dt, p.QKV()), alloc(dt, p.Out()), alloc(dtype.F32, p.Rows()), alloc(dt, p.Out()), alloc(dt, p.QKV())
			x, xhat, w, bias, rstd := alloc(dt, rows*cols), alloc(dt, rows*cols), alloc(dtype.F32, cols), alloc(dtype.F32, cols), alloc(dtype.F32, rows)
			dw, db := alloc(dtype.F32, cols), alloc(dtype.F32, cols)
			for _, k := range []struct {
				name string
				fn   func()
			}{
				{"Attention", func() { d.Attention(y, lse, qkv, p) }},
				{"AttentionGrad", func() { d.AttentionGrad(dqkv, dy, qkv, y, lse, p) }},
				{"LayerNorm", func() { d.LayerNorm(y, xhat, rstd, x, w, bias, rows, cols, 1e-5) }},
				{"LayerNormGrad", func() { d.LayerNormGrad(x, dw, db, dy, xhat, rstd, w, rows, cols) }},
			} {
				b.Run(fmt.Sprintf("%s/%v/%s", s.name, dt, k.name), func(b *testing.B) {
					k.fn()
					if err := d.Sync(); err != nil {
						b.Fatal(err)
					}
					b.ResetTimer()
					for range b.N {
						k.fn()
					}
					if err := d.Sync(); err != nil {
						b.Fatal(err)
					}
				})
			}
			for _, buf := range bufs {
				d.Free(buf)
			}
		}
	}
}
