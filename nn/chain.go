package nn

import (
	"fmt"
	"strconv"

	"github.com/mixprec/mixprec/autograd"
)

// Chain is a model whose forward pass runs a fixed sequence of units, each
// one's output the next one's only input: the candidates for gradient
// checkpointing. Any contiguous run of units can be recomputed as one
// segment, so a memory planner chooses both what to recompute and where
// the kept boundaries fall (a single unit, a transformer block's two
// halves, every √n units).
type Chain interface {
	Module
	// Units are the chain's units in the order Forward applies them.
	Units() []Unit
	// SetRecompute makes Forward checkpoint each span of r as one segment;
	// nil runs every unit as it is. The chain keeps r until set again.
	SetRecompute(r *Recompute)
}

// Unit is one link of a Chain: a module and the name a plan shows for it.
type Unit struct {
	Name string
	M    Module
}

// Span is the units [Lo, Hi) of a chain, run as one checkpointed segment.
type Span struct{ Lo, Hi int }

// Len is the number of units in s.
func (s Span) Len() int { return s.Hi - s.Lo }

func (s Span) String() string {
	if s.Hi == s.Lo+1 {
		return strconv.Itoa(s.Lo)
	}
	return fmt.Sprintf("%d-%d", s.Lo, s.Hi-1)
}

// Recompute is which units of a chain are recomputed during backward
// instead of kept: each span runs as one checkpointed segment
// (autograd.Graph.Checkpoint), whose output alone stays for the backward
// pass. Spans are in order and do not overlap; units in none run as they
// are.
type Recompute struct {
	Spans []Span
	// Probe, when set, is told where each unit begins and ends (a memory
	// planner's dry step measures there); nil in training.
	Probe ChainProbe
}

// ChainProbe is called at the boundaries of a chain's units as RunChain
// runs them: before unit i (end false) and after it (end true), on the
// graph that runs it (inside a checkpointed segment, the segment's own
// graph, both the first time and when the segment is recomputed, which
// g.Recomputing reports); and with unit -1 before the first unit and after
// the last, on the chain's graph.
type ChainProbe func(g *autograd.Graph, unit int, end bool)

// EvenSpans is n units checkpointed in the given number of segments of
// nearly equal length, every unit in one (Split's boundaries; 0 segments
// means DefaultSegments).
func EvenSpans(n, segments int) []Span {
	if n == 0 {
		return nil
	}
	b := Split(n, segments)
	spans := make([]Span, len(b)-1)
	for i := range spans {
		spans[i] = Span{b[i], b[i+1]}
	}
	return spans
}

// CheckSpans panics unless spans are in order, non-empty, disjoint and
// within n units; op names the caller in the message.
func CheckSpans(op string, spans []Span, n int) {
	prev := 0
	for _, s := range spans {
		if s.Lo < prev || s.Hi <= s.Lo || s.Hi > n {
			panic(fmt.Sprintf("%s: spans %v over %d units; want non-empty spans in order, without overlap, within [0, %d)", op, spans, n, n))
		}
		prev = s.Hi
	}
}

// RunChain applies units to x in order, each span of r as one checkpointed
// segment (r nil: none), and calls r's probe at the boundaries. Recomputing
// a unit changes no number: its gradients are bitwise those of running it
// as it is.
//
// Each unit's output is freed once the next unit or span has taken it
// (autograd.Graph.Free: at once if nothing saved it, else once the
// backward pass is done with it), inside spans too, so that no value
// between units outlives its use; x itself is freed so only with freeInput
// (x is then the caller's result, which it will not read again).
func RunChain(g *autograd.Graph, units []Module, r *Recompute, x *autograd.Var, freeInput bool) *autograd.Var {
	var spans []Span
	var probe ChainProbe
	if r != nil {
		spans, probe = r.Spans, r.Probe
		CheckSpans("nn.RunChain", spans, len(units))
	}
	if probe != nil {
		probe(g, -1, false)
	}
	// next is y, the output that follows x, with x freed when it is not
	// the caller's to keep (a unit may hand its input on unchanged).
	next := func(g *autograd.Graph, x, y *autograd.Var, free bool) *autograd.Var {
		if free && y != x {
			g.Free(x)
		}
		return y
	}
	run := func(g *autograd.Graph, i int, x *autograd.Var) *autograd.Var {
		if probe != nil {
			probe(g, i, false)
		}
		x = units[i].Forward(g, x)
		if probe != nil {
			probe(g, i, true)
		}
		return x
	}
	free := freeInput
	for i := 0; i < len(units); {
		if len(spans) == 0 || spans[0].Lo > i {
			x = next(g, x, run(g, i, x), free)
			free = true
			i++
			continue
		}
		s := spans[0]
		spans = spans[1:]
		x = next(g, x, g.Checkpoint(func(g *autograd.Graph, in []*autograd.Var) []*autograd.Var {
			y := in[0]
			for j := s.Lo; j < s.Hi; j++ {
				y = next(g, y, run(g, j, y), j > s.Lo)
			}
			return []*autograd.Var{y}
		}, x)[0], free)
		free = true
		i = s.Hi
	}
	if probe != nil {
		probe(g, -1, true)
	}
	return x
}

// Units lists s's layers as a chain's units, each nested Sequential's
// layers in its place (a ResNet's stages become their blocks), named by
// their paths in State ("1.2" for the third layer of the second).
func (s *Sequential) Units() []Unit {
	var out []Unit
	var walk func(prefix string, s *Sequential)
	walk = func(prefix string, s *Sequential) {
		for i, l := range s.Layers {
			name := prefix + strconv.Itoa(i)
			if inner, ok := l.(*Sequential); ok {
				walk(name+".", inner)
				continue
			}
			out = append(out, Unit{Name: name, M: l})
		}
	}
	walk("", s)
	return out
}

// SetRecompute makes Forward run s's units (Units) with the spans of r
// checkpointed; nil restores the plain forward pass.
func (s *Sequential) SetRecompute(r *Recompute) {
	if r != nil {
		CheckSpans("nn.Sequential.SetRecompute", r.Spans, len(s.Units()))
	}
	s.recompute = r
}

// Modules are the units' modules, in order.
func Modules(units []Unit) []Module {
	out := make([]Module, len(units))
	for i, u := range units {
		out[i] = u.M
	}
	return out
}
