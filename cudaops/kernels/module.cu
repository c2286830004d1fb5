// module.cu: the one translation unit `make kernels` compiles, so each
// architecture gets one PTX module holding every kernel. The families live
// in their own files.
#include "elementwise.cu"
#include "reduce.cu"
#include "softmax.cu"
#include "conv.cu"
#include "pool.cu"
#include "norm.cu"
#include "optim.cu"
#include "random.cu"
#include "transformer.cu"
#include "gemm.cu"
