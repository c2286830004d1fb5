package nn_test

import (
	"fmt"
	"testing"

	"github.com/mixprec/mixprec/amp"
	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/internal/reftest"
	"github.com/mixprec/mixprec/internal/testdev"
	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/tensor"
)

// layerResult is PyTorch's output and input gradients for one rounding of
// the inputs.
type layerResult struct {
	Out   reftest.Array   `json:"out"`
	Grads []reftest.Array `json:"grads"`
}

type layerRef struct {
	Inputs []reftest.Array `json:"inputs"`
	R      reftest.Array   `json:"r"`
	layerResult
	F16  layerResult `json:"f16"`
	BF16 layerResult `json:"bf16"`
}

// want picks the result for inputs rounded to dt.
func (r layerRef) want(dt dtype.DType) layerResult {
	switch dt {
	case dtype.F16:
		return r.F16
	case dtype.BF16:
		return r.BF16
	}
	return r.layerResult
}

// layerOps build each reference case from its inputs (the first is the
// layer's input x, the rest its parameters).
var layerOps = map[string]func(g *autograd.Graph, in []*autograd.Var) *autograd.Var{
	"conv2d_s1p1":    func(g *autograd.Graph, in []*autograd.Var) *autograd.Var { return g.Conv2d(in[0], in[1], in[2], 1, 1) },
	"conv2d_s2p0":    func(g *autograd.Graph, in []*autograd.Var) *autograd.Var { return g.Conv2d(in[0], in[1], nil, 2, 0) },
	"conv2d_1x1_s2":  func(g *autograd.Graph, in []*autograd.Var) *autograd.Var { return g.Conv2d(in[0], in[1], in[2], 2, 0) },
	"maxpool_2":      func(g *autograd.Graph, in []*autograd.Var) *autograd.Var { return g.MaxPool2d(in[0], 2, 2, 0) },
	"maxpool_3s2p1":  func(g *autograd.Graph, in []*autograd.Var) *autograd.Var { return g.MaxPool2d(in[0], 3, 2, 1) },
	"avgpool_3s2p1":  func(g *autograd.Graph, in []*autograd.Var) *autograd.Var { return g.AvgPool2d(in[0], 3, 2, 1) },
	"global_avgpool": func(g *autograd.Graph, in []*autograd.Var) *autograd.Var { return g.GlobalAvgPool(in[0]) },
	"gelu":           func(g *autograd.Graph, in []*autograd.Var) *autograd.Var { return g.GELU(in[0]) },
}

// TestLayersMatchPyTorch runs each layer on PyTorch's inputs and compares
// its output and the gradients of sum(out·r) with PyTorch's, in F32 and
// with the layer computing in F16 and BF16 (inputs kept F32, as parameters
// are; the layer's own cast rounds them), each within its dtype's tolerance.
// For the 16-bit runs the reference is PyTorch's float64 result on inputs
// rounded to that dtype: the layer's arithmetic is what is under test.
func TestLayersMatchPyTorch(t *testing.T) {
	testdev.Each(t, func(t *testing.T, dev device.Device) {
		var refs map[string]layerRef
		reftest.Load(t, "layers", &refs)
		for name, ref := range refs {
			op, ok := layerOps[name]
			if !ok {
				t.Errorf("no op for reference case %q", name)
				continue
			}
			for _, dt := range dtype.All {
				t.Run(fmt.Sprintf("%s/%v", name, dt), func(t *testing.T) {
					g := autograd.NewGraph(dev)
					defer g.Release()
					var in, leaves []*autograd.Var
					for _, a := range ref.Inputs {
						v := g.Leaf(tensor.FromHost(dev, dtype.F32, device.Temp, a.Host()), true)
						defer v.Value.Release()
						leaves = append(leaves, v)
						if dt != dtype.F32 {
							// Run the op itself in dt: cast its input there first.
							in = append(in, g.Cast(v, dt))
						} else {
							in = append(in, v)
						}
					}
					out := op(g, in)
					r := g.Leaf(tensor.FromHost(dev, dtype.F32, device.Temp, ref.R.Host()), false)
					defer r.Value.Release()
					g.Backward(g.Sum(g.Mul(out, r)))
					want := ref.want(dt)
					reftest.Compare(t, "out", out.Value.ToHost(), want.Out, dt)
					for i, w := range want.Grads {
						// Gradients reach the F32 leaves through the casts:
						// they were computed in dt and rounded to it.
						reftest.Compare(t, fmt.Sprintf("grad %d", i), leaves[i].Grad.ToHost(), w, dt)
					}
				})
			}
		}
	})
}

// TestBatchNormMatchesPyTorch checks BatchNorm2d in training mode (output,
// input and parameter gradients, updated running statistics) and then in
// evaluation mode, in F32 and under F16 and BF16 autocast.
func TestBatchNormMatchesPyTorch(t *testing.T) {
	testdev.Each(t, func(t *testing.T, dev device.Device) {
		type result struct {
			Out         reftest.Array `json:"out"`
			DX          reftest.Array `json:"dx"`
			DWeight     reftest.Array `json:"dweight"`
			DBias       reftest.Array `json:"dbias"`
			RunningMean reftest.Array `json:"running_mean"`
			RunningVar  reftest.Array `json:"running_var"`
			EvalOut     reftest.Array `json:"eval_out"`
		}
		var ref struct {
			X      reftest.Array `json:"x"`
			Weight reftest.Array `json:"weight"`
			Bias   reftest.Array `json:"bias"`
			R      reftest.Array `json:"r"`
			EvalX  reftest.Array `json:"eval_x"`
			Before struct {
				RunningMean reftest.Array `json:"running_mean"`
				RunningVar  reftest.Array `json:"running_var"`
			} `json:"before"`
			result
			F16  result `json:"f16"`
			BF16 result `json:"bf16"`
		}
		reftest.Load(t, "batchnorm", &ref)
		for _, dt := range dtype.All {
			t.Run(dt.String(), func(t *testing.T) {
				bn := nn.NewBatchNorm2d(3)
				bn.Weight = autograd.NewParam("weight", ref.Weight.Host())
				bn.Bias = autograd.NewParam("bias", ref.Bias.Host())
				bn.RunningMean = autograd.NewBuffer("running_mean", ref.Before.RunningMean.Host())
				bn.RunningVar = autograd.NewBuffer("running_var", ref.Before.RunningVar.Host())
				nn.To(bn, dev)
				defer nn.Release(bn)
				g := autograd.NewGraph(dev)
				if dt != dtype.F32 {
					amp.Autocast(g, dt)
				}
				x := g.Leaf(tensor.FromHost(dev, dtype.F32, device.Temp, ref.X.Host()), true)
				defer x.Value.Release()
				xin := x
				if dt != dtype.F32 {
					xin = g.Cast(x, dt) // as a low-precision conv output would arrive
				}
				out := bn.Forward(g, xin)
				if out.DType() != xin.DType() {
					t.Errorf("output dtype %v, want the input's %v", out.DType(), xin.DType())
				}
				r := g.Leaf(tensor.FromHost(dev, dtype.F32, device.Temp, ref.R.Host()), false)
				defer r.Value.Release()
				g.Backward(g.Sum(g.Mul(out, r)))
				want := map[dtype.DType]result{dtype.F32: ref.result, dtype.F16: ref.F16, dtype.BF16: ref.BF16}[dt]
				reftest.Compare(t, "out", out.Value.ToHost(), want.Out, dt)
				reftest.Compare(t, "dx", x.Grad.ToHost(), want.DX, dt)
				reftest.Compare(t, "dweight", bn.Weight.Grad.ToHost(), want.DWeight, dt)
				reftest.Compare(t, "dbias", bn.Bias.Grad.ToHost(), want.DBias, dt)
				reftest.Compare(t, "running_mean", bn.RunningMean.Value.ToHost(), want.RunningMean, dt)
				reftest.Compare(t, "running_var", bn.RunningVar.Value.ToHost(), want.RunningVar, dt)
				g.Release()

				nn.SetTraining(bn, false)
				g = autograd.NewGraph(dev, autograd.WithoutGrad())
				defer g.Release()
				xe := g.Input(ref.EvalX.Host())
				if dt != dtype.F32 {
					xe = g.Cast(xe, dt)
				}
				reftest.Compare(t, "eval out", bn.Forward(g, xe).Value.ToHost(), want.EvalOut, dt)
			})
		}
	})
}
