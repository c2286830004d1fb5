package datasets_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mixprec/mixprec/datasets"
)

// panicMessage runs f and returns what it panicked with, or "" if it did not.
func panicMessage(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}

func writeTemp(t *testing.T, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "corpus.txt")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadTextFile(t *testing.T) {
	const text = "Où est le café?\nIci, à Zürich.\n"
	p := writeTemp(t, []byte(text))
	tx, err := datasets.LoadText(p)
	if err != nil {
		t.Fatalf("LoadText: %v", err)
	}
	if tx.Name != p {
		t.Errorf("Name %q, want %q", tx.Name, p)
	}
	want := []rune("\n ,.?IOZacefhilrstàéùü")
	if !slices.Equal(tx.Vocab, want) {
		t.Errorf("Vocab %q, want %q", string(tx.Vocab), string(want))
	}
	n := utf8.RuneCountInString(text)
	if len(tx.Train) != n*9/10 || len(tx.Train)+len(tx.Val) != n {
		t.Errorf("train %d, val %d; want %d and %d", len(tx.Train), len(tx.Val), n*9/10, n-n*9/10)
	}
	if got := tx.Decode(slices.Concat(tx.Train, tx.Val)); got != text {
		t.Errorf("Decode(all ids) = %q, want %q", got, text)
	}
	ids, err := tx.Encode(text)
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	if !slices.Equal(ids, slices.Concat(tx.Train, tx.Val)) {
		t.Errorf("Encode(text) = %v, want the corpus's ids %v", ids, slices.Concat(tx.Train, tx.Val))
	}
	if got := tx.Decode(nil); got != "" {
		t.Errorf("Decode(nil) = %q, want \"\"", got)
	}
}

// TestSplit checks the 90/10 split at sizes where int(0.9*n) rounds.
func TestSplit(t *testing.T) {
	for _, c := range []struct{ n, train int }{
		{1, 0}, {2, 1}, {9, 8}, {10, 9}, {11, 9}, {19, 17}, {20, 18}, {4025028, 3622525}, {567038, 510334},
	} {
		t.Run(fmt.Sprint(c.n), func(t *testing.T) {
			tx, err := datasets.NewText("a", []byte(strings.Repeat("a", c.n)))
			if err != nil {
				t.Fatal(err)
			}
			if len(tx.Train) != c.train || len(tx.Val) != c.n-c.train {
				t.Errorf("train %d, val %d; want %d, %d", len(tx.Train), len(tx.Val), c.train, c.n-c.train)
			}
		})
	}
}

func TestLoadTextErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, corpus, want string
	}{
		{"empty file", writeTemp(t, nil), "is empty"},
		{"not UTF-8", writeTemp(t, []byte("fine\nthen \xe9t\xe9\n")), "is not UTF-8 text (byte 0xe9 at offset 10, line 2"},
		{"a cut character", writeTemp(t, []byte("caf\xc3")), "byte 0xc3 at offset 3, line 1"},
		{"UTF-16", writeTemp(t, []byte("\xff\xfeh\x00i\x00")), "byte 0xff at offset 0"},
		{"missing", filepath.Join(dir, "nosuch.txt"), "no such file"},
		{"a directory", dir, "is a directory"},
		{"no name", "", "no corpus named"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tx, err := datasets.LoadText(c.corpus)
			if err == nil {
				t.Fatalf("LoadText(%q) = %d characters, nil error; want an error containing %q", c.corpus, len(tx.Train)+len(tx.Val), c.want)
			}
			if !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "datasets: ") {
				t.Errorf("error %q, want one from datasets containing %q", err, c.want)
			}
		})
	}
}

func TestEncodeUnknown(t *testing.T) {
	tx, err := datasets.NewText("abc", []byte("abc"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ in, want string }{
		{"abd", `'d' at byte 2 is not in the vocabulary of abc`},
		{"aé", `'é' at byte 1`},
		{"\n", `'\n' at byte 0`},
	} {
		ids, err := tx.Encode(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Encode(%q) = %v, %v; want an error containing %q", c.in, ids, err, c.want)
		}
	}
	if msg := panicMessage(func() { tx.Decode([]int32{0, 3}) }); !strings.Contains(msg, "datasets.Decode: id 3 (at 1 of 2) is outside the vocabulary") {
		t.Errorf("Decode of id 3 of 3: panic %q, want one naming the id", msg)
	}
	if msg := panicMessage(func() { tx.Decode([]int32{-1}) }); !strings.Contains(msg, "id -1") {
		t.Errorf("Decode of id -1: panic %q, want one naming the id", msg)
	}
}

// iota32 is 0, 1, ..., n-1, so that an id is its own offset.
func iota32(n int) []int32 {
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(i)
	}
	return ids
}

func TestSampleWindows(t *testing.T) {
	t.Run("offsets follow the generator", func(t *testing.T) {
		const n, block, windows = 50, 8, 6
		ids := iota32(n)
		x, y := make([]int32, windows*block), make([]int32, windows*block)
		datasets.SampleWindows(ids, block, rand.New(rand.NewPCG(1, 2)), x, y)
		ref := rand.New(rand.NewPCG(1, 2))
		for j := range windows {
			o := int32(ref.IntN(n - block))
			for k := range block {
				if x[j*block+k] != o+int32(k) || y[j*block+k] != o+int32(k)+1 {
					t.Fatalf("window %d: x %v, y %v; want offset %d", j, x[j*block:(j+1)*block], y[j*block:(j+1)*block], o)
				}
			}
		}
	})
	t.Run("every offset and no further", func(t *testing.T) {
		const n, block = 7, 4 // offsets 0, 1, 2: the last window's target ends at the last id
		ids := iota32(n)
		rng := rand.New(rand.NewPCG(3, 4))
		seen := map[int32]int{}
		x, y := make([]int32, block), make([]int32, block)
		for range 300 {
			datasets.SampleWindows(ids, block, rng, x, y)
			seen[x[0]]++
			if y[block-1] > n-1 {
				t.Fatalf("target %v runs past the %d ids", y, n)
			}
		}
		if len(seen) != n-block || seen[0] == 0 || seen[n-block-1] == 0 {
			t.Errorf("offsets drawn %v, want each of 0..%d", seen, n-block-1)
		}
	})
	t.Run("exactly one window", func(t *testing.T) {
		ids := iota32(5)
		x, y := make([]int32, 8), make([]int32, 8)
		datasets.SampleWindows(ids, 4, rand.New(rand.NewPCG(5, 6)), x, y)
		if want := []int32{0, 1, 2, 3, 0, 1, 2, 3}; !slices.Equal(x, want) {
			t.Errorf("x %v, want %v", x, want)
		}
		if want := []int32{1, 2, 3, 4, 1, 2, 3, 4}; !slices.Equal(y, want) {
			t.Errorf("y %v, want %v", y, want)
		}
	})
	rng := rand.New(rand.NewPCG(7, 8))
	for _, c := range []struct {
		name           string
		n, block       int
		lenX, lenY     int
		wantInThePanic string
	}{
		{"block larger than the data", 4, 4, 4, 4, "4 ids, block 4"},
		{"empty ids", 0, 1, 1, 1, "0 ids, block 1"},
		{"x not whole windows", 20, 4, 6, 6, "x and y of 6 and 6"},
		{"x and y differ", 20, 4, 8, 4, "x and y of 8 and 4"},
		{"block zero", 20, 0, 0, 0, "block 0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			msg := panicMessage(func() {
				datasets.SampleWindows(iota32(c.n), c.block, rng, make([]int32, c.lenX), make([]int32, c.lenY))
			})
			if !strings.Contains(msg, "datasets.SampleWindows") || !strings.Contains(msg, c.wantInThePanic) {
				t.Errorf("panic %q, want one naming SampleWindows and %q", msg, c.wantInThePanic)
			}
		})
	}
}

func TestEvalWindows(t *testing.T) {
	for _, c := range []struct{ n, block, max, want int }{
		{0, 4, 10, 0},
		{1, 4, 10, 0},
		{4, 4, 10, 0}, // a window needs block+1 ids
		{5, 4, 10, 1},
		{8, 4, 10, 1},
		{9, 4, 10, 2}, // the second window's target ends at the last id
		{100, 4, 3, 3},
		{3, 8, 10, 0}, // block larger than the data
		{100, 4, 0, 0},
		{402503, 64, 200, 200},
		{402503, 64, 1 << 20, 6289},
	} {
		t.Run(fmt.Sprintf("n=%d,block=%d,max=%d", c.n, c.block, c.max), func(t *testing.T) {
			if got := datasets.EvalWindows(iota32(c.n), c.block, c.max); got != c.want {
				t.Errorf("got %d, want %d", got, c.want)
			}
		})
	}
	for _, c := range []struct{ block, max int }{{0, 1}, {4, -1}} {
		if msg := panicMessage(func() { datasets.EvalWindows(iota32(5), c.block, c.max) }); !strings.Contains(msg, "datasets.EvalWindows") {
			t.Errorf("block %d, max %d: panic %q, want one naming EvalWindows", c.block, c.max, msg)
		}
	}
}

func TestEvalWindow(t *testing.T) {
	ids := iota32(9)
	x, y := make([]int32, 4), make([]int32, 4)
	for _, c := range []struct {
		i    int
		x, y []int32
	}{
		{0, []int32{0, 1, 2, 3}, []int32{1, 2, 3, 4}},
		{1, []int32{4, 5, 6, 7}, []int32{5, 6, 7, 8}}, // at the very end
	} {
		datasets.EvalWindow(ids, 4, c.i, x, y)
		if !slices.Equal(x, c.x) || !slices.Equal(y, c.y) {
			t.Errorf("window %d: x %v, y %v; want %v, %v", c.i, x, y, c.x, c.y)
		}
	}
	for _, c := range []struct {
		name     string
		n, i     int
		lenX     int
		inPanics string
	}{
		{"past the end", 9, 2, 4, "window 2 of block 4 in 9 ids (2 windows fit)"},
		{"negative", 9, -1, 4, "window -1"},
		{"block larger than the data", 3, 0, 4, "in 3 ids (0 windows fit)"},
		{"x too short", 9, 0, 3, "x and y of 3 and 4"},
	} {
		t.Run(c.name, func(t *testing.T) {
			msg := panicMessage(func() { datasets.EvalWindow(iota32(c.n), 4, c.i, make([]int32, c.lenX), make([]int32, 4)) })
			if !strings.Contains(msg, "datasets.EvalWindow") || !strings.Contains(msg, c.inPanics) {
				t.Errorf("panic %q, want one naming EvalWindow and %q", msg, c.inPanics)
			}
		})
	}
}

// TestOpticks checks the figures of the corpus every Go toolchain ships
// (the loader itself checks its SHA-256).
func TestOpticks(t *testing.T) {
	tx, err := datasets.LoadText("opticks")
	if err != nil {
		t.Fatalf("LoadText: %v", err)
	}
	const chars = 567038 // 567,198 bytes: 160 characters take two bytes
	if tx.Name != "opticks" || len(tx.Vocab) != 91 || len(tx.Train) != 510334 || len(tx.Val) != chars-510334 {
		t.Errorf("%s: vocabulary %d, train %d, val %d; want opticks, 91, 510334, %d",
			tx.Name, len(tx.Vocab), len(tx.Train), len(tx.Val), chars-510334)
	}
	head := tx.Decode(tx.Train[:200])
	if !strings.Contains(head, "OPTICKS") {
		t.Errorf("the text begins %q; want Newton's title", head)
	}
}
