#!/bin/sh
# run.sh OUTDIR: runs the CUDA bundle's checks in a fixed order, each with a
# time limit, and leaves two files in OUTDIR: summary.txt (each step's exit
# status and seconds, then the key figures: test results, MNIST accuracy on
# the GPU and the CPU, GEMM TFLOP/s of mixprec and torch.mm and their F16
# ratio) and mixprec-cuda-logs.tar.gz (every step's NN-step.log, the
# summary and the memcompare chart, in a folder mixprec-cuda-logs/). The
# logs are written to a temporary folder and packed at the end, because the
# machines this runs on return only a few files from their output folder.
# The summary is also printed on standard output.
#
# The whole run stays within a budget of 470 s (MIXPREC_BUNDLE_BUDGET):
# each step has its own time limit, cut to what is left of the budget, and
# steps that find it spent are skipped and say so. A normal run takes two
# to four minutes. When `mixprec device` does not report the CUDA backend,
# the run stops right after that check, with one line saying why, and
# exits 1: every later step needs the GPU (the device-parametrised tests
# fail under MIXPREC_REQUIRE_CUDA=1 rather than pass on the CPU alone).
#
# Environment: MIXPREC_PYTHON picks the Python with PyTorch (default: the
# first of /opt/torch/.venv/bin/python and python3); MIXPREC_CUBLAS, folders
# (colon-separated) holding libcublas.so.N, when the search misses them.
# Unset, it is filled with the nvidia/*/lib folders holding libcublas that
# the Pythons present report in their site-packages or that common
# prefixes hold (the binaries search those prefixes too). Likewise
# MIXPREC_LIBNCCL (libnccl.so.2, which the NCCL steps need) and
# MIXPREC_NCCL_H (the nccl.h the NCCL bindings are checked against) come
# from the first nvidia/nccl wheel found there, unless set.
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: run.sh OUTDIR}
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
budget=${MIXPREC_BUNDLE_BUDGET:-470}
export MIXPREC_DATA="$here/data"
export MIXPREC_REQUIRE_CUDA=1
py=${MIXPREC_PYTHON:-}
if [ -z "$py" ]; then
	if [ -x /opt/torch/.venv/bin/python ]; then py=/opt/torch/.venv/bin/python; else py=python3; fi
fi
start=$(date +%s)

# The logs go to a temporary folder, packed into OUTDIR when the run ends,
# however it ends.
work=$(mktemp -d "${TMPDIR:-/tmp}/mixprec-run.XXXXXX") || exit 1
logs=$work/mixprec-cuda-logs
mkdir -p "$logs"
summary=$logs/summary.txt
bins=""
finished=0
finish() {
	[ "$finished" = 1 ] && return
	finished=1
	echo "total $(($(date +%s) - start))s" >>"$summary"
	cp "$summary" "$out/summary.txt"
	rm -f "$out/mixprec-cuda-logs.tar.gz"
	if tar czf "$out/mixprec-cuda-logs.tar.gz" -C "$work" mixprec-cuda-logs; then
		echo "run.sh: logs in $out/mixprec-cuda-logs.tar.gz, summary in $out/summary.txt"
	else
		echo "run.sh: could not pack the logs into $out/mixprec-cuda-logs.tar.gz" >&2
	fi
	echo
	cat "$summary"
	rm -rf "$work"
	[ -n "$bins" ] && rm -rf "$bins"
}
trap finish EXIT
trap 'exit 130' INT TERM HUP

: >"$summary"
echo "mixprec CUDA bundle run, $(date -u +%Y-%m-%dT%H:%M:%SZ), $(uname -n)" >>"$summary"
head -1 "$here/README" 2>/dev/null >>"$summary"

# stop MESSAGE: ends the run after the step that showed there is no point
# going on, saying why in one line (in the summary and on stdout).
stop() {
	echo "run.sh: stopping: $1" | tee -a "$summary"
	exit 1
}

# step NAME LIMIT DIR CMD...: runs CMD in DIR with a time limit, logging
# to NAME.log, and records its status in the summary and in $rc.
step() {
	name=$1 limit=$2 dir=$3
	shift 3
	rc=""
	left=$((budget - ($(date +%s) - start)))
	if [ "$left" -lt 10 ]; then
		printf '%-22s skipped: the run is over its %ds budget\n' "$name" "$budget" >>"$summary"
		return
	fi
	# No step may run past the budget.
	[ "$limit" -gt "$left" ] && limit=$left
	log=$logs/$name.log
	echo "== $name: $*" | tee "$log"
	t0=$(date +%s)
	(cd "$dir" && timeout -k 10 "$limit" "$@") >>"$log" 2>&1
	rc=$?
	t1=$(date +%s)
	note=""
	[ $rc -eq 124 ] && note=" (timed out after ${limit}s)"
	printf '%-22s rc=%-3d %4ds%s\n' "$name" "$rc" $((t1 - t0)) "$note" >>"$summary"
	echo "== $name: rc=$rc in $((t1 - t0))s$note" | tee -a "$log"
}

# The binaries are Go without cgo, but they load libcuda and cuBLAS with
# the system's dynamic loader, so they are linked against glibc: without
# its loader they cannot even start, which deserves one clear line.
loader=/lib64/ld-linux-x86-64.so.2
if [ "$(uname -m)" = x86_64 ] && [ ! -e "$loader" ]; then
	stop "this machine has no $loader: the bundle's binaries need glibc (a musl system such as Alpine cannot run them)"
fi

# The binaries travel packed; unpack them next to nothing else, and remove
# them when done.
B=$here/bin
T=$here/tests
if [ ! -x "$here/bin/mixprec" ]; then
	bins=$(mktemp -d "${TMPDIR:-/tmp}/mixprec-bundle.XXXXXX") || stop "cannot create a temporary folder"
	tar xzf "$here/payload.tar.gz" -C "$bins" || stop "cannot unpack payload.tar.gz"
	B=$bins/bin
	T=$bins/tests
fi
src=$here/src

# NVIDIA's pip wheels: ask each Python where its packages live, and add
# the common prefixes. cuBLAS is in site-packages/nvidia/cu13/lib (CUDA 13)
# or nvidia/cublas/lib (11 and 12); NCCL in nvidia/nccl/lib, with its
# header in nvidia/nccl/include.
nl='
'
sites=""
if [ -z "${MIXPREC_CUBLAS:-}" ] || [ -z "${MIXPREC_LIBNCCL:-}" ]; then
	for p in "$py" python3; do
		command -v "$p" >/dev/null 2>&1 || continue
		s=$("$p" -c 'import site, sys
print("\n".join(site.getsitepackages() + [site.getusersitepackages()] + sys.path))' 2>/dev/null) && sites="$sites$nl$s"
	done
	for d in /usr/local/lib/python3*/dist-packages /usr/local/lib/python3*/site-packages \
		/usr/lib/python3/dist-packages /usr/lib/python3*/site-packages \
		"${HOME:-/nonexistent}"/.local/lib/python3*/site-packages \
		/opt/*/.venv/lib/python3*/site-packages /opt/*/venv/lib/python3*/site-packages \
		/opt/conda/lib/python3*/site-packages "${VIRTUAL_ENV:-/nonexistent}"/lib/python3*/site-packages; do
		sites="$sites$nl$d"
	done
fi
old_ifs=$IFS
IFS=$nl
if [ -z "${MIXPREC_CUBLAS:-}" ]; then
	found=""
	for d in $sites; do
		for lib in "$d"/nvidia/*/lib; do
			for f in "$lib"/libcublas.so.*; do
				[ -e "$f" ] || continue
				case ":$found:" in
				*":$lib:"*) ;;
				*) found=${found:+$found:}$lib ;;
				esac
				break
			done
		done
	done
	if [ -n "$found" ]; then
		export MIXPREC_CUBLAS="$found"
		echo "cuBLAS folders from the Python environments: $found" >>"$summary"
	fi
fi
if [ -z "${MIXPREC_LIBNCCL:-}" ]; then
	for d in $sites; do
		[ -e "$d/nvidia/nccl/lib/libnccl.so.2" ] || continue
		export MIXPREC_LIBNCCL="$d/nvidia/nccl/lib/libnccl.so.2"
		echo "NCCL from the Python environments: $MIXPREC_LIBNCCL" >>"$summary"
		if [ -z "${MIXPREC_NCCL_H:-}" ] && [ -e "$d/nvidia/nccl/include/nccl.h" ]; then
			export MIXPREC_NCCL_H="$d/nvidia/nccl/include/nccl.h"
		fi
		break
	done
fi
IFS=$old_ifs

step 01-nvidia-smi 15 "$here" nvidia-smi
step 02-device 30 "$here" "$B/mixprec" device
if ! grep -q '^backend: cuda' "$logs/02-device.log" 2>/dev/null; then
	why=$(sed -n 's/^CUDA unavailable: //p' "$logs/02-device.log" 2>/dev/null | head -1)
	if [ -z "$why" ]; then
		why="mixprec device ended with rc=${rc:-none} without naming a backend; see 02-device.log"
	fi
	stop "CUDA did not open, so nothing after the CUDA check can run: $why"
fi
step 03-cudaops-tests 150 "$src" "$T/cudaops.test" -test.v -test.timeout 140s \
	-test.run 'TestConformance|TestAgainstCPU|TestDeterministic|TestInfo|TestOpenWithoutGPU|TestCublasLoads|TestNoDriver|TestPTX|TestDriverResultHighBits|Example'
step 04-testdev-tests 30 "$src" "$T/internal-testdev.test" -test.v -test.timeout 25s
for p in autograd amp nn optim; do
	[ -x "$T/$p.test" ] && step "05-$p-tests" 40 "$src" "$T/$p.test" -test.short -test.v -test.timeout 35s
done
step 06-mnist-tests 60 "$src" "$T/examples-mnist.test" -test.short -test.v -test.timeout 55s
step 07-mnist-cuda-f16 60 "$here" "$B/mnist" -device cuda -amp f16 -epochs 3 -json
step 08-bench-matmul 60 "$here" "$B/mixprec" bench matmul -json
step 09-torch-mm 60 "$here" "$py" "$here/torch_mm.py" --json
step 10-mnist-cpu-f16 90 "$here" "$B/mnist" -device cpu -amp f16 -epochs 3 -json
if "$B/mixprec" memcompare -h 2>&1 | grep -q -- '-device'; then
	step 11-memcompare-cuda 90 "$here" "$B/mixprec" memcompare -device cuda -png "$logs/memcompare.png"
else
	printf '%-22s skipped: this mixprec memcompare has no -device flag\n' 11-memcompare-cuda >>"$summary"
fi
# NCCL: the bindings against the wheel's nccl.h, one rank on this GPU, and,
# on a machine with several GPUs, one process per GPU (collectives, a
# stalled rank, training that matches one GPU). Each skips with one line
# where NCCL or a second GPU is missing.
step 12-nccl-tests 120 "$src" "$T/cudaops.test" -test.v -test.timeout 110s -test.run 'NCCL|ParseCHeader'
step 13-nccl-dp-tests 90 "$src" "$T/distributed.test" -test.v -test.timeout 80s -test.run 'NCCL'

# Key figures.
{
	echo
	echo "== device"
	grep -v '^==' "$logs/02-device.log" 2>/dev/null
	echo
	echo "== tests (counts of subtests)"
	for f in "$logs"/0[3-6]-*.log "$logs"/1[23]-*.log; do
		[ -f "$f" ] || continue
		printf '%-28s pass %5d  fail %4d  skip %4d\n' "$(basename "$f" .log)" \
			"$(grep -c -- '--- PASS' "$f")" "$(grep -c -- '--- FAIL' "$f")" "$(grep -c -- '--- SKIP' "$f")"
	done
	grep -h -- '--- FAIL' "$logs"/0[3-6]-*.log "$logs"/1[23]-*.log 2>/dev/null | head -20
	echo
	echo "== NCCL (which library and header; all-reduce bandwidth where several GPUs ran)"
	grep -h -- 'nccl.*\.go:[0-9]*: \(NCCL \|checking against\|all-reduce of\)' "$logs"/12-nccl-tests.log 2>/dev/null | sed 's/^ *//' | head -12
	echo
	echo "== MNIST, 3 epochs, -amp f16 (last JSON line)"
	for f in 07-mnist-cuda-f16 10-mnist-cpu-f16; do
		line=$(grep '^{' "$logs/$f.log" 2>/dev/null | tail -1)
		echo "$f: ${line:-(no JSON summary; see $f.log)}"
	done
	echo
	echo "== GEMM"
	grep '^{' "$logs/08-bench-matmul.log" 2>/dev/null | tail -1
	grep '^{' "$logs/09-torch-mm.log" 2>/dev/null | tail -1
} >>"$summary"
# The F16 ratio, and the accuracies side by side, when a Python is around.
if command -v "$py" >/dev/null 2>&1; then
	"$py" - "$logs" >>"$summary" 2>&1 <<'PY'
import json, os, sys
logs = sys.argv[1]
def last_json(name):
    try:
        lines = [l for l in open(os.path.join(logs, name + ".log")) if l.startswith("{")]
        return json.loads(lines[-1]) if lines else None
    except (OSError, ValueError):
        return None
mp, tm = last_json("08-bench-matmul"), last_json("09-torch-mm")
if mp and tm:
    ours = {r["dtype"]: r["gpu_tflops"] for r in mp.get("results", [])}
    theirs = {r["dtype"]: r["tflops"] for r in tm.get("results", [])}
    print()
    print("== mixprec bench matmul vs torch.mm (n=%d)" % mp["n"])
    for dt in ours:
        if dt in theirs and theirs[dt] > 0:
            print("%-5s mixprec %8.2f TFLOP/s  torch.mm %8.2f TFLOP/s  ratio %.2f" % (dt, ours[dt], theirs[dt], ours[dt] / theirs[dt]))
    if "f16" in ours and theirs.get("f16"):
        r = ours["f16"] / theirs["f16"]
        print("F16 at least 60%% of torch.mm: %s (%.0f%%)" % ("PASS" if r >= 0.6 else "FAIL", 100 * r))
gpu, cpu = last_json("07-mnist-cuda-f16"), last_json("10-mnist-cpu-f16")
if gpu and cpu:
    print()
    print("== MNIST -amp f16 -epochs 3: test accuracy cuda %.4f, cpu %.4f (difference %.4f); samples/s cuda %.0f, cpu %.0f"
          % (gpu["test_accuracy"], cpu["test_accuracy"], gpu["test_accuracy"] - cpu["test_accuracy"],
             gpu.get("samples_per_sec", 0), cpu.get("samples_per_sec", 0)))
PY
fi
# A completed run exits 0 whatever its steps returned: their statuses are in
# the summary, which is the result.
exit 0
