#!/bin/sh
# check-kernels.sh: what `make check-kernels` (and so CI) runs. It installs
# the CUDA toolkit when nvcc is missing, rebuilds the PTX into a temporary
# folder and requires it to equal the committed cudaops/ptx files byte for
# byte, then assembles every PTX with ptxas for every real architecture it
# can run on (compute_70 PTX for sm_70, sm_80 and sm_90; compute_80 PTX for
# sm_80 and sm_90), which catches PTX the driver's JIT would reject.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
NVCC=${NVCC:-nvcc}
PTXAS=${PTXAS:-ptxas}
if ! command -v "$NVCC" >/dev/null 2>&1; then
	echo "check-kernels: $NVCC not found; installing Debian's nvidia-cuda-toolkit"
	sh "$root/tools/cuda/install-toolkit.sh"
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sh "$root/tools/cuda/build-kernels.sh" "$tmp"
status=0
for f in kernels_sm70.ptx kernels_sm80.ptx; do
	if ! cmp -s "$tmp/$f" "$root/cudaops/ptx/$f"; then
		echo "check-kernels: cudaops/ptx/$f is not what cudaops/kernels/*.cu compile to; run make kernels" >&2
		diff "$root/cudaops/ptx/$f" "$tmp/$f" | head -20 >&2 || true
		status=1
	fi
done
for pair in 70:70 70:80 70:90 80:80 80:90; do
	v=${pair%:*}
	sm=${pair#*:}
	if ! "$PTXAS" -arch=sm_$sm -o "$tmp/k.cubin" "$root/cudaops/ptx/kernels_sm$v.ptx"; then
		echo "check-kernels: ptxas -arch=sm_$sm rejects cudaops/ptx/kernels_sm$v.ptx" >&2
		status=1
	else
		echo "check-kernels: ptxas sm_$sm accepts kernels_sm$v.ptx"
	fi
done
[ $status -eq 0 ] && echo "check-kernels: PTX up to date"
exit $status
