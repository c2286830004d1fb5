package autograd_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/internal/testdev"
	"github.com/mixprec/mixprec/tensor"
)

// TestInputDTypes: InputAs(h, dt) holds h rounded to dt, InputBits of h's
// rounded patterns the same values, and Input is InputAs(h, F32); none
// requires grad, and each is released with the graph.
func TestInputDTypes(t *testing.T) {
	testdev.Each(t, func(t *testing.T, dev device.Device) {
		rng := rand.New(rand.NewPCG(1, 2))
		h := tensor.NormalHost(rng, 0, 3, 5, 7)
		before := dev.MemStats()
		for _, dt := range dtype.All {
			g := autograd.NewGraph(dev)
			x := g.InputAs(h, dt)
			if x.DType() != dt || x.RequiresGrad() {
				t.Fatalf("InputAs(%v): dtype %v, requires grad %v", dt, x.DType(), x.RequiresGrad())
			}
			got := x.Value.ToHost()
			for i, v := range h.Data {
				if want := dtype.Round(dt, v); math.Float32bits(got[i]) != math.Float32bits(want) {
					t.Fatalf("InputAs(%v)[%d] = %v, want %v", dt, i, got[i], want)
				}
			}
			if dt != dtype.F32 {
				bits := make([]uint16, len(h.Data))
				dtype.Encode(dt, bits, h.Data)
				y := g.InputBits(tensor.Host16{Shape: h.Shape, DType: dt, Bits: bits})
				if y.DType() != dt || y.RequiresGrad() {
					t.Fatalf("InputBits(%v): dtype %v, requires grad %v", dt, y.DType(), y.RequiresGrad())
				}
				for i, v := range y.Value.ToHost() {
					if math.Float32bits(v) != math.Float32bits(got[i]) {
						t.Fatalf("InputBits(%v)[%d] = %v, InputAs gave %v", dt, i, v, got[i])
					}
				}
			}
			g.Release()
		}
		if after := dev.MemStats(); after.Live != before.Live {
			t.Errorf("live memory %d after the graphs, %d before", after.Live, before.Live)
		}
	})
}

// TestInputBitsRefuses: patterns that do not fill the shape, or that claim
// F32, panic naming the problem, and leave no memory behind.
func TestInputBitsRefuses(t *testing.T) {
	testdev.Each(t, func(t *testing.T, dev device.Device) {
		before := dev.MemStats()
		for _, c := range []struct {
			name string
			h    tensor.Host16
			want string
		}{
			{"short", tensor.Host16{Shape: []int{2, 3}, DType: dtype.F16, Bits: make([]uint16, 5)}, "5 values for shape [2 3]"},
			{"f32", tensor.Host16{Shape: []int{2}, DType: dtype.F32, Bits: make([]uint16, 2)}, "want F16 or BF16"},
		} {
			g := autograd.NewGraph(dev)
			func() {
				defer func() {
					r := recover()
					if r == nil || !strings.Contains(fmt.Sprint(r), c.want) {
						t.Errorf("%s: panic %v, want one containing %q", c.name, r, c.want)
					}
				}()
				g.InputBits(c.h)
			}()
			g.Release()
		}
		if after := dev.MemStats(); after.Live != before.Live {
			t.Errorf("live memory %d after the refusals, %d before", after.Live, before.Live)
		}
	})
}
