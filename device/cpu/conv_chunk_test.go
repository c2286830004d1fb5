package cpu

import "testing"

func TestConvChunkFor(t *testing.T) {
	for _, tt := range []struct {
		l2, want int
	}{
		{0, 1 << 20}, {-1, 1 << 20}, {256 << 10, 1 << 20}, {512 << 10, 1 << 20},
		{1 << 20, 2 << 20}, {2 << 20, 4 << 20}, {4 << 20, 8 << 20}, {32 << 20, 8 << 20},
	} {
		if got := convChunkFor(tt.l2); got != tt.want {
			t.Errorf("convChunkFor(%d) = %d, want %d", tt.l2, got, tt.want)
		}
	}
}

func TestParseCacheSize(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int
	}{
		{"2048K", 2 << 20}, {"1M", 1 << 20}, {"524288", 512 << 10}, {"", 0}, {"K", 0}, {"-4K", 0}, {"12Q", 0},
	} {
		if got := parseCacheSize(tt.in); got != tt.want {
			t.Errorf("parseCacheSize(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
	t.Logf("this machine: L2 %d bytes, conv chunk %d bytes", l2Bytes(), convChunk())
}
