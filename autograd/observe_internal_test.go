package autograd

import (
	"testing"

	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/tensor"
)

type phaseLog []Phase

func (p *phaseLog) OpStart(Op, Phase)    {}
func (p *phaseLog) OpEnd(_ Op, ph Phase) { *p = append(*p, ph) }

// TestRecomputePhase checks that ops recorded on a graph that is
// re-running a checkpointed segment are reported as Recompute.
func TestRecomputePhase(t *testing.T) {
	dev := cpu.New()
	w := ParamOf("w", tensor.FromSlice(dev, dtype.F32, 0, []float32{0.5, 2}, 2))
	defer w.Value.Release()
	for _, c := range []struct {
		replay bool
		want   Phase
	}{{false, Forward}, {true, Recompute}} {
		var got phaseLog
		g := NewGraph(dev, WithObserver(&got))
		g.replay = c.replay
		g.Mul(g.Input(tensor.Host{Shape: []int{2}, Data: []float32{1, 2}}), w)
		g.Release()
		if len(got) != 1 || got[0] != c.want {
			t.Errorf("replay %v: phases %v, want [%v]", c.replay, got, c.want)
		}
	}
}
