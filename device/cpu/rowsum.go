package cpu

// sumBlock is the number of elements sumWiden's partial sums span: 32
// float64 accumulators, element i going to partial i mod 32, so that the
// additions form 32 independent chains rather than one (whose latency
// bounded Reduce over a convolution's output at one element every four
// cycles). The SIMD loops keep the partials in registers, four of eight
// lanes (AVX-512) or eight of four (AVX2), and combine them as
// combinePartials does.
const sumBlock = 32

// sumWiden returns the float64 sum of src in sumWiden's order: the
// elements of whole blocks of sumBlock into their partials, the partials
// combined by combinePartials, then the tail one element at a time.
// Every SIMD level gives the bits sumWidenGo does.
func sumWiden(src []float32) float64 {
	n := len(src) &^ (sumBlock - 1)
	var s float64
	if n > 0 {
		s = sumBlocks(src[:n])
	}
	for _, x := range src[n:] {
		s += float64(x)
	}
	return s
}

// sumBlocksGo is the reference for the SIMD block sums; len(src) is a
// multiple of sumBlock.
func sumBlocksGo(src []float32) float64 {
	var p [sumBlock]float64
	for i := 0; i < len(src); i += sumBlock {
		b := src[i : i+sumBlock]
		for j := range p {
			p[j] += float64(b[j])
		}
	}
	return combinePartials(&p)
}

// combinePartials adds the 32 partials in the order the SIMD loops do: the
// four groups of eight pairwise ((0+1)+(2+3), lane by lane), then the eight
// lanes halving (k+4, then k+2, then k+1).
func combinePartials(p *[sumBlock]float64) float64 {
	var q [8]float64
	for k := range q {
		q[k] = (p[k] + p[8+k]) + (p[16+k] + p[24+k])
	}
	for k := range 4 {
		q[k] += q[k+4]
	}
	for k := range 2 {
		q[k] += q[k+2]
	}
	return q[0] + q[1]
}
