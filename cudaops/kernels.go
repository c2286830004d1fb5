package cudaops

import (
	_ "embed"
	"encoding/binary"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unsafe"
)

// The PTX `make kernels` compiles from kernels/*.cu (see
// tools/cuda/build-kernels.sh): one module per virtual architecture. The
// driver JIT-compiles it for the GPU present; the compute_80 build is used
// on devices of compute capability 8.0 and later.
var (
	//go:embed ptx/kernels_sm70.ptx
	ptxSM70 string
	//go:embed ptx/kernels_sm80.ptx
	ptxSM80 string
)

// ptxFor returns the PTX to load on a device of compute capability
// major.minor, and its name.
func ptxFor(major, minor int) (string, string) {
	if major >= 8 {
		return ptxSM80, "compute_80"
	}
	return ptxSM70, "compute_70"
}

// kernel is one entry point of the module. params are the sizes in bytes of
// its parameters as the PTX declares them: every launch is checked against
// them, so an argument list that disagrees with the CUDA source panics
// instead of handing a kernel garbage.
type kernel struct {
	name   string
	fn     uintptr // CUfunction, 0 until the module is loaded
	params []int
}

// kernelSet is every kernel the Go side launches.
type kernelSet struct {
	fill, copy, gemmScale, axpby, binary, unary, unaryGrad     *kernel
	reduceThread, reduceBlock, expand                          *kernel
	logSoftmax, logSoftmaxGrad, crossEntropy, crossEntropyGrad *kernel
	argmax, im2col, col2im, maxpool, maxpoolGrad, avgpool      *kernel
	avgpoolGrad, sgd, adam, unscale, dropout, gemm, gemmFold   *kernel
	batchnormAct, bnSums, bnCombine, bnGradApply               *kernel
	transformerSet                                             // transformer.go
	all                                                        []*kernel
}

// newKernelSet finds every kernel's parameter list in ptx.
func newKernelSet(ptx string) (*kernelSet, error) {
	entries, err := parsePTX(ptx)
	if err != nil {
		return nil, err
	}
	ks := &kernelSet{}
	for _, k := range []struct {
		p    **kernel
		name string
	}{
		{&ks.fill, "mp_fill"}, {&ks.copy, "mp_copy"}, {&ks.gemmScale, "mp_gemm_scale"},
		{&ks.axpby, "mp_axpby"}, {&ks.binary, "mp_binary"}, {&ks.unary, "mp_unary"},
		{&ks.unaryGrad, "mp_unary_grad"}, {&ks.reduceThread, "mp_reduce_thread"},
		{&ks.reduceBlock, "mp_reduce_block"}, {&ks.expand, "mp_expand"},
		{&ks.logSoftmax, "mp_log_softmax"}, {&ks.logSoftmaxGrad, "mp_log_softmax_grad"},
		{&ks.crossEntropy, "mp_cross_entropy"}, {&ks.crossEntropyGrad, "mp_cross_entropy_grad"},
		{&ks.argmax, "mp_argmax"}, {&ks.im2col, "mp_im2col"}, {&ks.col2im, "mp_col2im"},
		{&ks.maxpool, "mp_maxpool"}, {&ks.maxpoolGrad, "mp_maxpool_grad"},
		{&ks.avgpool, "mp_avgpool"}, {&ks.avgpoolGrad, "mp_avgpool_grad"},
		{&ks.sgd, "mp_sgd"}, {&ks.adam, "mp_adam"},
		{&ks.unscale, "mp_unscale"}, {&ks.dropout, "mp_dropout"}, {&ks.gemm, "mp_gemm"},
		{&ks.batchnormAct, "mp_batchnorm_act"}, {&ks.gemmFold, "mp_gemm_fold"},
		{&ks.bnSums, "mp_bn_sums"}, {&ks.bnCombine, "mp_bn_combine"}, {&ks.bnGradApply, "mp_bn_grad_apply"},
	} {
		params, ok := entries[k.name]
		if !ok {
			return nil, fmt.Errorf("cudaops: the embedded PTX has no kernel %s (run make kernels)", k.name)
		}
		*k.p = &kernel{name: k.name, params: params}
		ks.all = append(ks.all, *k.p)
	}
	if err := ks.transformerSet.find(entries, &ks.all); err != nil {
		return nil, err
	}
	return ks, nil
}

var (
	entryRE = regexp.MustCompile(`\.entry\s+(\w+)\s*\(([^)]*)\)`)
	arrayRE = regexp.MustCompile(`\[(\d+)\]`)

	typeSizes = map[string]int{
		".u64": 8, ".s64": 8, ".b64": 8, ".f64": 8,
		".u32": 4, ".s32": 4, ".b32": 4, ".f32": 4,
		".u16": 2, ".s16": 2, ".b16": 2, ".u8": 1, ".s8": 1, ".b8": 1,
	}
)

// parsePTX returns the parameter sizes of every .entry in ptx.
func parsePTX(ptx string) (map[string][]int, error) {
	out := map[string][]int{}
	for _, m := range entryRE.FindAllStringSubmatch(ptx, -1) {
		var sizes []int
		for _, p := range strings.Split(m[2], ",") {
			p = strings.TrimSpace(p)
			if p == "" {
				continue
			}
			size := 0
			if a := arrayRE.FindStringSubmatch(p); a != nil {
				size, _ = strconv.Atoi(a[1]) // .param .align A .b8 name[size]
			} else if f := strings.Fields(p); len(f) == 3 && f[0] == ".param" {
				size = typeSizes[f[1]] // .param .type name
			}
			if size == 0 {
				return nil, fmt.Errorf("cudaops: cannot size PTX parameter %q of %s", p, m[1])
			}
			sizes = append(sizes, size)
		}
		out[m[1]] = sizes
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("cudaops: no kernels in the embedded PTX (run make kernels)")
	}
	return out, nil
}

// param is one kernel argument's bytes.
type param struct {
	small [8]byte
	size  int
	big   []byte // structs passed by value
}

func pPtr(p uint64) param {
	var a param
	binary.LittleEndian.PutUint64(a.small[:], p)
	a.size = 8
	return a
}

func pU64(v uint64) param { return pPtr(v) }

// pInt is a C int. The Go side keeps every size below 2^31 (see maxElems),
// so a larger value is a bug here.
func pInt(v int) param {
	if v < math.MinInt32 || v > math.MaxInt32 {
		panic(fmt.Sprintf("cudaops: kernel argument %d does not fit a C int", v))
	}
	var a param
	binary.LittleEndian.PutUint32(a.small[:], uint32(int32(v)))
	a.size = 4
	return a
}

func pBool(b bool) param {
	if b {
		return pInt(1)
	}
	return pInt(0)
}

func pF32(v float32) param {
	var a param
	binary.LittleEndian.PutUint32(a.small[:], math.Float32bits(v))
	a.size = 4
	return a
}

// pInts is a struct of C ints (Dims, Conv, Pool in common.cuh and the
// kernel files).
func pInts(v ...int) param {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(pInt(x).int32()))
	}
	return param{size: len(b), big: b}
}

func (a param) int32() int32 { return int32(binary.LittleEndian.Uint32(a.small[:])) }

// maxGrid caps the blocks of a grid-stride launch: enough to fill any GPU,
// small enough that an index plus the grid's stride stays below 2^31.
const maxGrid = 1 << 15

// gridFor is the number of blocks for n elements, one thread each.
func gridFor(n int) int { return max(1, min((n+blockSize-1)/blockSize, maxGrid)) }

// launch checks ps against k's PTX signature and queues k. The caller holds
// the device (mu and enter).
func (d *Device) launch(k *kernel, grid int, ps ...param) {
	if len(ps) != len(k.params) {
		panic(fmt.Sprintf("cudaops: kernel %s takes %d arguments, given %d", k.name, len(k.params), len(ps)))
	}
	total := 0
	for i, p := range ps {
		if p.size != k.params[i] {
			panic(fmt.Sprintf("cudaops: kernel %s: argument %d is %d bytes, the PTX declares %d", k.name, i, p.size, k.params[i]))
		}
		total += (p.size + 7) &^ 7
	}
	// One arena holds every argument, 8-aligned; the pointer array the
	// driver reads points into it. Both are Go heap memory, which does not
	// move, and the driver copies the arguments before cuLaunchKernel
	// returns.
	arena := make([]byte, total)
	ptrs := make([]unsafe.Pointer, len(ps))
	off := 0
	for i, p := range ps {
		if p.big != nil {
			copy(arena[off:], p.big)
		} else {
			copy(arena[off:], p.small[:p.size])
		}
		ptrs[i] = unsafe.Pointer(&arena[off])
		off += (p.size + 7) &^ 7
	}
	if err := d.g.launch(k, grid, ptrs); err != nil {
		panic("cudaops: " + err.Error())
	}
}
