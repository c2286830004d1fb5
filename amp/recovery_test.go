package amp_test

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mixprec/mixprec/amp"
)

// seq is n copies of v.
func seq(v bool, n int) []bool {
	out := make([]bool, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// pytorch is PyTorch's _amp_update_scale_ over a sequence of overflow
// verdicts, written out here as its kernel reads: the scale a float32, the
// factors doubles, each product formed in double and rounded once to
// float32; no floor; growth after interval clean steps in a row, unless
// the grown scale is not finite.
func pytorch(scale float32, interval int, overflow []bool) []float32 {
	tracker := 0
	var out []float32
	for _, inf := range overflow {
		if inf {
			scale, tracker = float32(float64(scale)*0.5), 0
		} else if tracker++; tracker == interval {
			if grown := float64(scale) * 2; grown <= math.MaxFloat32 {
				scale = float32(grown)
			}
			tracker = 0
		}
		out = append(out, scale)
	}
	return out
}

// TestRecoveryFromFloor drives the default scaler through a storm of 60
// overflows (the scale reaches the floor 2^-14 after 30) and then clean
// steps: it must grow every 10 clean steps, back to 2^16 after 300 (with
// only the growth interval, it would take 60,000), and on past it until
// the first overflow above the floor, after which growth takes the usual
// 2000 clean steps again.
func TestRecoveryFromFloor(t *testing.T) {
	s := amp.NewGradScaler()
	scales := drive(t, s, seq(true, 60))
	if got := scales[59]; got != amp.DefaultMinScale || !s.Recovering() {
		t.Fatalf("after the storm: scale %v, recovering %v; want the floor and recovering", got, s.Recovering())
	}
	scales = drive(t, s, seq(false, 300))
	for i, got := range scales {
		want := amp.DefaultMinScale * float32(int(1)<<((i+1)/10))
		if got != want {
			t.Fatalf("clean step %d after the storm: scale %v, want %v", i+1, got, want)
		}
	}
	if got := scales[299]; got != 65536 {
		t.Errorf("scale 300 clean steps after the storm %v, want 65536", got)
	}
	drive(t, s, seq(false, 20)) // still recovering: two more growths
	if got := s.LossScale(); got != 0x1p18 || !s.Recovering() {
		t.Errorf("scale %v, recovering %v; want 2^18 and still recovering", got, s.Recovering())
	}
	drive(t, s, seq(true, 1)) // the scale's level, found again
	if got := s.LossScale(); got != 0x1p17 || s.Recovering() {
		t.Errorf("after an overflow above the floor: scale %v, recovering %v; want 2^17 and not recovering", got, s.Recovering())
	}
	scales = drive(t, s, seq(false, 2000))
	if scales[1998] != 0x1p17 || scales[1999] != 0x1p18 {
		t.Errorf("after the recovery: scale %v at 1999 clean steps, %v at 2000; want 2^17 then 2^18", scales[1998], scales[1999])
	}
}

// TestNoFloorIsPyTorch drives a scaler made with MinScale(0) through a
// storm of 200 overflows and 300 clean steps: its trajectory is PyTorch's
// exactly, down to a scale of 0 after which every step is skipped, as
// PyTorch's are.
func TestNoFloorIsPyTorch(t *testing.T) {
	s := amp.NewGradScaler(amp.MinScale(0))
	overflow := append(seq(true, 200), seq(false, 300)...)
	got := drive(t, s, overflow)
	// From 2^16, the 166th halving rounds 2^-149 to 0 (ties to even).
	want := pytorch(65536, 2000, overflow)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("update %d: scale %v (%x), PyTorch %v (%x)", i+1, got[i], got[i], want[i], want[i])
		}
	}
	if got[len(got)-1] != 0 || s.Skipped() != 500 {
		t.Errorf("final scale %v with %d of 500 steps skipped; want PyTorch's 0 and every step skipped", got[len(got)-1], s.Skipped())
	}
}

// TestDefaultIsPyTorchUntilFloor drives the default scaler and PyTorch's
// rule with random overflows that never bring the scale to the floor:
// the trajectories agree bit for bit, so the floor and its recovery change
// nothing in ordinary training.
func TestDefaultIsPyTorchUntilFloor(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	overflow := make([]bool, 5000)
	for i := range overflow {
		overflow[i] = rng.IntN(6) == 0
	}
	got := drive(t, amp.NewGradScaler(amp.GrowthInterval(3)), overflow)
	want := pytorch(65536, 3, overflow)
	low := want[0]
	for i := range want {
		low = min(low, want[i])
		if got[i] != want[i] {
			t.Fatalf("update %d: scale %v, PyTorch %v", i+1, got[i], want[i])
		}
	}
	if low <= amp.DefaultMinScale {
		t.Fatalf("the sequence reached the floor (lowest scale %v); it is meant not to", low)
	}
}

// TestRecoveringStateResumes saves a scaler's state mid-recovery through
// JSON and loads it into a fresh one: both go on the same way.
func TestRecoveringStateResumes(t *testing.T) {
	a := amp.NewGradScaler()
	drive(t, a, append(seq(true, 40), seq(false, 25)...))
	js, err := json.Marshal(a.State())
	if err != nil {
		t.Fatal(err)
	}
	var st amp.State
	if err := json.Unmarshal(js, &st); err != nil {
		t.Fatal(err)
	}
	b := amp.NewGradScaler(amp.RecoveryInterval(500))
	if err := b.Load(st); err != nil {
		t.Fatal(err)
	}
	if !b.Recovering() {
		t.Fatalf("loaded state %s is not recovering", js)
	}
	rest := append(seq(false, 40), true, false)
	ga, gb := drive(t, a, rest), drive(t, b, rest)
	for i := range ga {
		if ga[i] != gb[i] {
			t.Fatalf("update %d after loading: scale %v, the original's %v", i+1, gb[i], ga[i])
		}
	}
	// A floorless scaler's state says so, and loads as floorless.
	none := amp.NewGradScaler(amp.MinScale(0), amp.InitScale(0x1p-140))
	drive(t, none, seq(true, 20))
	c := amp.NewGradScaler()
	if err := c.Load(none.State()); err != nil || c.MinScale() != 0 || c.LossScale() != 0 {
		t.Errorf("loading a floorless state at scale 0: %v, floor %v, scale %v; want no floor and 0", err, c.MinScale(), c.LossScale())
	}
}
