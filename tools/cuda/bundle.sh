#!/bin/sh
# bundle.sh OUT: builds into OUT (make cuda-bundle: ./cuda-bundle, which git
# ignores) everything a GPU machine without Go needs to check the CUDA
# backend, and OUT/run.sh, which runs it all (see tools/cuda/run-bundle.sh).
# tools/cuda/bundle_test.go builds a bundle and runs it on the machine at
# hand, and checks what this file says about the binaries.
#
# Binaries are Go built without cgo (CGO_ENABLED=0), but they are not
# static: to open libcuda and cuBLAS at run time, purego links them
# dynamically against glibc (libc.so.6, libdl.so.2 and libpthread.so.0,
# through the loader /lib64/ld-linux-x86-64.so.2, with no symbol versions
# required, so any glibc will do; musl systems such as Alpine cannot run
# them). They are stripped (-s -w) and shipped as OUT/payload.tar.xz (bin/
# and tests/, about 110 MiB unpacked and 21 packed on 2026-12-04, where
# gzip left 36 and the bundle over its budget; run.sh unpacks them into a
# temporary folder, with xz or, without it, Python's lzma). They are built with -trimpath: a test finds testdata/
# (and the PyTorch interop test its script, tools/reference/
# torch_safetensors.py) through its source path, which -trimpath makes
# relative (github.com/mixprec/mixprec/...), so run.sh runs the tests from
# OUT/src where that path exists.
#
# The bundle holds what run.sh runs and nothing else, and travels to the
# GPU machine with the repository's working tree: the two together must
# stay under 60 MiB (the machines take 64), which the last lines check,
# counting every file that travels (tracked, or untracked and not ignored,
# and the bundle).
set -eu
out=${1:?usage: bundle.sh OUT}
root=$(cd "$(dirname "$0")/../.." && pwd)
GO=${GO:-go}
cd "$root"
rm -rf "$out"
mkdir -p "$out/bin" "$out/tests" "$out/src/github.com/mixprec/mixprec" "$out/data"
out=$(cd "$out" && pwd)
trap 'rm -rf "$out/bin" "$out/tests" "$out/data/austen"' EXIT
export CGO_ENABLED=0

# Test binaries: the CUDA backend's (conformance, CPU comparison, NCCL),
# the device helper, the packages whose tests run on every device, and
# data parallelism over NCCL.
for pkg in cudaops internal/testdev autograd amp nn optim examples/mnist distributed; do
	name=$(echo "$pkg" | tr / -)
	$GO test -c -trimpath -ldflags="-s -w" -o "$out/tests/$name.test" "./$pkg"
	if [ ! -f "$out/tests/$name.test" ]; then
		echo "bundle: ./$pkg has no tests; skipped"
	fi
done

# Programs.
$GO build -trimpath -ldflags="-s -w" -o "$out/bin/mixprec" ./cmd/mixprec
$GO build -trimpath -ldflags="-s -w" -o "$out/bin/mnist" ./examples/mnist
$GO build -trimpath -ldflags="-s -w" -o "$out/bin/cifar" ./examples/cifar
$GO build -trimpath -ldflags="-s -w" -o "$out/bin/gpt" ./examples/gpt

# Data and support files.
if [ ! -f data/mnist/train-images-idx3-ubyte.gz ]; then
	echo "bundle: data/mnist is missing; run make data" >&2
	exit 1
fi
cp -r data/mnist "$out/data/mnist"
# The GPT's corpus travels in the payload, where xz packs its 4 MB of text
# into about 1.
if [ ! -f data/austen/austen.txt ]; then
	echo "bundle: data/austen/austen.txt is missing; run make data" >&2
	exit 1
fi
mkdir -p "$out/data/austen"
cp data/austen/austen.txt "$out/data/austen/austen.txt"
cp -r testdata "$out/src/github.com/mixprec/mixprec/testdata"
mkdir -p "$out/src/github.com/mixprec/mixprec/tools/reference"
cp tools/reference/torch_safetensors.py "$out/src/github.com/mixprec/mixprec/tools/reference/"
(cd "$out" && tar cf - bin tests data/austen | xz -T0 -6 >payload.tar.xz && rm -rf bin tests data/austen)
cp tools/cuda/torch_mm.py "$out/torch_mm.py"
cp tools/cuda/run-bundle.sh "$out/run.sh"
chmod +x "$out/run.sh" "$out/torch_mm.py"
cat >"$out/README" <<TXT
mixprec CUDA bundle, built $(date -u +%Y-%m-%dT%H:%MZ) from $(git rev-parse --short HEAD 2>/dev/null || echo "an unknown commit")$(git diff --quiet 2>/dev/null || echo " with local changes").
Run:  sh run.sh OUTDIR     (about 3 to 8 minutes; prints the summary and leaves two files in
OUTDIR: summary.txt and mixprec-cuda-logs.tar.gz, which holds one log per step; a run
killed part-way leaves summary.txt and the folder mixprec-cuda-logs/ as far as it got)
The binaries (bin/mixprec, bin/mnist, bin/cifar, bin/gpt, tests/*.test) and the GPT's corpus
(data/austen/austen.txt) are in payload.tar.xz; run.sh
unpacks them into a temporary folder. To use them by hand: tar xJf payload.tar.xz
They are Go without cgo but dynamically linked against glibc: they need
/lib64/ld-linux-x86-64.so.2 and libc.so.6, libdl.so.2, libpthread.so.0 (any glibc).
TXT

# What travels: the working tree's files (tracked, and untracked but not
# ignored) and the bundle.
bundle=$(du -sb "$out" | cut -f1)
tree=$(git ls-files -z --cached --others --exclude-standard | xargs -0 -r stat -c %s -- 2>/dev/null | awk '{s += $1} END {print s + 0}')
total=$((bundle + tree))
echo "bundle: $out, $((bundle / 1048576)) MiB; with the working tree that travels with it, $((total / 1048576)) MiB of 60"
if [ "$total" -gt $((60 * 1048576)) ]; then
	echo "bundle: the bundle and the working tree together are over the 60 MiB budget" >&2
	exit 1
fi
