package nn

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestOptions: each constructor takes its options, with PyTorch's
// defaults where none is given, and panics naming itself and the option
// on one it does not take.
func TestOptions(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, c := range []struct {
		name string
		got  any
		want string
	}{
		{"conv/defaults", NewConv2d(3, 8, 3, rng), "Conv2d(3, 8, kernel=3, stride=1, padding=0, bias=true)"},
		{"conv/options", NewConv2d(3, 8, 3, rng, Stride(2), Padding(1), Bias(false)), "Conv2d(3, 8, kernel=3, stride=2, padding=1, bias=false)"},
		{"maxpool/defaults", MaxPool2d(2), "MaxPool2d(2, stride=2, padding=0)"},
		{"avgpool/options", AvgPool2d(3, Stride(1), Padding(1)), "AvgPool2d(3, stride=1, padding=1)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := fmt.Sprint(c.got); got != c.want {
				t.Errorf("got %s, want %s", got, c.want)
			}
		})
	}
	if l := NewLinear(4, 2, rng, Bias(false)); l.B != nil {
		t.Error("NewLinear with Bias(false) has a bias")
	}
	if l := NewLayerNorm(4); l.B == nil {
		t.Error("NewLayerNorm has no bias by default")
	}
	if l := NewLayerNorm(4, Bias(false)); l.B != nil {
		t.Error("NewLayerNorm with Bias(false) has a bias")
	}
	for _, c := range []struct {
		name, want string
		make       func()
	}{
		{"linear/stride", "nn.NewLinear: option Stride does not apply", func() { NewLinear(4, 2, rng, Stride(2)) }},
		{"layernorm/padding", "nn.NewLayerNorm: option Padding does not apply", func() { NewLayerNorm(4, Padding(1)) }},
		{"maxpool/bias", "nn.MaxPool2d: option Bias does not apply", func() { MaxPool2d(2, Bias(true)) }},
		{"stride/0", "nn.Stride(0)", func() { Stride(0) }},
		{"padding/-1", "nn.Padding(-1)", func() { Padding(-1) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				if msg := fmt.Sprint(recover()); !strings.Contains(msg, c.want) {
					t.Errorf("panic %q, want one naming %q", msg, c.want)
				}
			}()
			c.make()
		})
	}
}
