#!/bin/sh
# run.sh OUTDIR: runs the CUDA bundle's checks in a fixed order, each with a
# time limit, and leaves two files in OUTDIR: summary.txt (each step's exit
# status and seconds, then the key figures: the driver, the tests' counts,
# the NCCL lines, a row per training run (MLP in F16 and BF16, the CNN,
# ResNet-20; accuracy, speed, peak memory), the GPT's losses on the GPU
# and the CPU, GEMM TFLOP/s of mixprec and
# torch.mm and their F16 ratio, and memcompare's rows) and
# mixprec-cuda-logs.tar.gz (every step's NN-step.log, the summary and the
# memcompare chart, in a folder mixprec-cuda-logs/). The summary is also
# printed on standard output.
#
# Every step writes its log into OUTDIR/mixprec-cuda-logs/ as it runs, and
# each line of the summary goes into OUTDIR/summary.txt as it is known, so
# that a run killed part-way (its machine's time spent, a hung step killed
# from outside) still returns what it did; a run that ends packs the
# folder into the archive, since the machines this runs on return only a
# few files from their output folder.
#
# The first gate waits for the driver: nvidia-smi is retried for up to
# 120 s (MIXPREC_DRIVER_WAIT), since a machine just started may not have
# loaded it yet. The NCCL steps run with NCCL_DEBUG=INFO, before the long
# training runs and benchmarks, so that a run short of time still says
# what NCCL did.
#
# The whole run stays within a budget of 470 s (MIXPREC_BUNDLE_BUDGET):
# each step has its own time limit, cut to what is left of the budget, and
# steps that find it spent are skipped and say so. When `mixprec device`
# does not report the CUDA backend, the run stops right after that check,
# with one line saying why, and exits 1: every later step needs the GPU
# (the device-parametrised tests fail under MIXPREC_REQUIRE_CUDA=1 rather
# than pass on the CPU alone).
#
# Environment: MIXPREC_PYTHON picks the Python with PyTorch (default: the
# first of /opt/torch/.venv/bin/python and python3; the tests that run
# PyTorch take it too); MIXPREC_CUBLAS, folders (colon-separated) holding
# libcublas.so.N, when the search misses them.
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
export MIXPREC_PYTHON="$py"
start=$(date +%s)

# The logs go straight into OUTDIR, as each step writes them; a run that
# ends packs them into one archive there, however it ends.
logs=$out/mixprec-cuda-logs
rm -rf "$logs" "$out/summary.txt" "$out/mixprec-cuda-logs.tar.gz"
mkdir -p "$logs" || exit 1
summary=$out/summary.txt
bins=""
finished=0
finish() {
	[ "$finished" = 1 ] && return
	finished=1
	echo "total $(($(date +%s) - start))s" >>"$summary"
	cp "$summary" "$logs/summary.txt"
	if tar czf "$out/mixprec-cuda-logs.tar.gz" -C "$out" mixprec-cuda-logs; then
		rm -rf "$logs"
		echo "run.sh: logs in $out/mixprec-cuda-logs.tar.gz, summary in $out/summary.txt"
	else
		echo "run.sh: could not pack the logs; they are in $logs" >&2
	fi
	echo
	cat "$summary"
	[ -n "$bins" ] && rm -rf "$bins"
	[ -n "${waiter:-}" ] && rm -f "$waiter"
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
D=$here/data
if [ ! -x "$here/bin/mixprec" ]; then
	bins=$(mktemp -d "${TMPDIR:-/tmp}/mixprec-bundle.XXXXXX") || stop "cannot create a temporary folder"
	if command -v xz >/dev/null 2>&1; then
		xz -dc "$here/payload.tar.xz" | tar xf - -C "$bins" || stop "cannot unpack payload.tar.xz"
	elif command -v python3 >/dev/null 2>&1; then
		python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' "$here/payload.tar.xz" "$bins" ||
			stop "cannot unpack payload.tar.xz with Python's lzma"
	else
		stop "cannot unpack payload.tar.xz: this machine has neither xz nor python3"
	fi
	B=$bins/bin
	T=$bins/tests
	D=$bins/data
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

# The first gate: the driver, which a machine just started may still be
# loading. nvidia-smi is tried every 5 s until it answers, for up to
# MIXPREC_DRIVER_WAIT seconds (not at all when there is none to try).
wait=${MIXPREC_DRIVER_WAIT:-120}
waiter=$(mktemp "${TMPDIR:-/tmp}/mixprec-wait-driver.XXXXXX") || stop "cannot create a temporary file"
cat >"$waiter" <<'SH'
limit=$1 t0=$(date +%s) tries=0
command -v nvidia-smi >/dev/null 2>&1 || { echo "nvidia-smi is not on PATH"; exit 127; }
while :; do
	tries=$((tries + 1))
	if timeout -k 5 15 nvidia-smi; then
		nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | sed "s/^/gpu, driver, memory: /"
		echo "the driver answered after $tries tries, $(($(date +%s) - t0))s"
		exit 0
	fi
	if [ $(($(date +%s) - t0)) -ge "$limit" ]; then
		echo "nvidia-smi did not answer in ${limit}s ($tries tries)"
		exit 1
	fi
	sleep 5
done
SH
step 01-nvidia-smi $((wait + 25)) "$here" sh "$waiter" "$wait"
rm -f "$waiter"
step 02-device 30 "$here" "$B/mixprec" device
if ! grep -q '^backend: cuda' "$logs/02-device.log" 2>/dev/null; then
	why=$(sed -n 's/^CUDA unavailable: //p' "$logs/02-device.log" 2>/dev/null | head -1)
	if [ -z "$why" ]; then
		why="mixprec device ended with rc=${rc:-none} without naming a backend; see 02-device.log"
	fi
	stop "CUDA did not open, so nothing after the CUDA check can run: $why"
fi
step 03-cudaops-tests 150 "$src" "$T/cudaops.test" -test.v -test.timeout 140s \
	-test.run 'TestConformance|TestAgainstCPU|TestDeterministic|TestInfo|TestOpenWithoutGPU|TestCublasLoads|TestNoDriver|TestPTX$|TestDriverResultHighBits|Example'
step 04-testdev-tests 30 "$src" "$T/internal-testdev.test" -test.v -test.timeout 25s
for p in autograd amp nn optim; do
	[ -x "$T/$p.test" ] && step "05-$p-tests" 40 "$src" "$T/$p.test" -test.short -test.v -test.timeout 35s
done
step 06-mnist-tests 60 "$src" "$T/examples-mnist.test" -test.short -test.v -test.timeout 55s
# NCCL, with its own account of what it does: the bindings against the
# wheel's nccl.h, one rank on this GPU, and, on a machine with several
# GPUs, one process per GPU (collectives, a stalled rank, training that
# matches one GPU). Each skips with one line where NCCL or a second GPU
# is missing. Before the long runs, so that a short budget still has them.
step 07-nccl-tests 120 "$src" env NCCL_DEBUG=INFO "$T/cudaops.test" -test.v -test.timeout 110s -test.run 'NCCL|ParseCHeader'
step 08-nccl-dp-tests 90 "$src" env NCCL_DEBUG=INFO "$T/distributed.test" -test.v -test.timeout 80s -test.run 'NCCL'
# Training on the GPU: the MLP in F16 and BF16, the CNN, ResNet-20.
step 09-mnist-cuda-f16 60 "$here" "$B/mnist" -device cuda -amp f16 -epochs 3 -json
step 10-mnist-cuda-bf16 60 "$here" "$B/mnist" -device cuda -amp bf16 -epochs 3 -json
step 11-mnist-cnn-cuda-f16 60 "$here" "$B/mnist" -device cuda -model cnn -amp f16 -epochs 1 -json
step 12-resnet20-cuda-f16 60 "$here" "$B/cifar" -device cuda -synthetic -amp f16 -max-steps 200 -json
# The character GPT: FP32 and BF16 autocast on the GPU, and FP32 on the
# CPU from the same binary and seed, whose losses the GPU's should match.
step 13-gpt-cuda-fp32 60 "$here" "$B/gpt" -device cuda -data "$D" -amp off -iters 200 -eval-every 0 -seed 1 -json
step 14-gpt-cuda-bf16 60 "$here" "$B/gpt" -device cuda -data "$D" -amp bf16 -iters 200 -eval-every 0 -seed 1 -json
step 15-gpt-cpu-fp32 60 "$here" "$B/gpt" -device cpu -data "$D" -amp off -iters 200 -eval-every 0 -seed 1 -json
step 16-bench-matmul 60 "$here" "$B/mixprec" bench matmul -json
step 17-torch-mm 60 "$here" "$py" "$here/torch_mm.py" --json
if "$B/mixprec" memcompare -h 2>&1 | grep -q -- '-device'; then
	step 18-memcompare-cuda 90 "$here" "$B/mixprec" memcompare -device cuda -png "$logs/memcompare.png"
else
	printf '%-22s skipped: this mixprec memcompare has no -device flag\n' 18-memcompare-cuda >>"$summary"
fi
# A memory budget planned through the GPU's MemStats: ResNet-20 in BF16
# and the GPT in FP32 at 0.6 of their peaks without a plan, each checked
# against its budget, its prediction and the unplanned run's bits.
step 19-budget-resnet20-cuda 60 "$here" "$B/mixprec" memcompare -device cuda -model resnet20 -amp bf16 -mem-budget 0.6x -verify 10
step 20-budget-gpt-cuda 60 "$here" "$B/mixprec" memcompare -device cuda -model gpt -mem-budget 0.6x -verify 10
# The CPU's MNIST, for the accuracies side by side: last, as the slowest.
step 21-mnist-cpu-f16 90 "$here" "$B/mnist" -device cpu -amp f16 -epochs 3 -json

# Key figures.
{
	echo
	echo "== driver"
	grep '^gpu, driver, memory: ' "$logs/01-nvidia-smi.log" 2>/dev/null || echo "(nvidia-smi did not say; see 01-nvidia-smi.log)"
	echo
	echo "== device"
	grep -v '^==' "$logs/02-device.log" 2>/dev/null
	echo
	echo "== tests (counts of subtests)"
	for f in "$logs"/0[3-8]-*.log; do
		[ -f "$f" ] || continue
		printf '%-28s pass %5d  fail %4d  skip %4d\n' "$(basename "$f" .log)" \
			"$(grep -c -- '--- PASS' "$f")" "$(grep -c -- '--- FAIL' "$f")" "$(grep -c -- '--- SKIP' "$f")"
	done
	grep -h -- '--- FAIL' "$logs"/0[3-8]-*.log 2>/dev/null | head -20
	echo
	echo "== NCCL (which library and header; all-reduce bandwidth where several GPUs ran; NCCL's own INFO lines)"
	grep -h -- 'nccl.*\.go:[0-9]*: \(NCCL \|checking against\|all-reduce of\)' "$logs"/07-nccl-tests.log 2>/dev/null | sed 's/^ *//' | head -12
	grep -h 'NCCL INFO' "$logs"/07-nccl-tests.log "$logs"/08-nccl-dp-tests.log 2>/dev/null | sed 's/^ *//' | head -8
	echo
	echo "== training runs (last JSON line of each)"
	for f in 09-mnist-cuda-f16 10-mnist-cuda-bf16 11-mnist-cnn-cuda-f16 12-resnet20-cuda-f16 13-gpt-cuda-fp32 14-gpt-cuda-bf16 15-gpt-cpu-fp32 21-mnist-cpu-f16; do
		line=$(grep '^{' "$logs/$f.log" 2>/dev/null | tail -1)
		echo "$f: ${line:-(no JSON summary; see $f.log)}"
	done
	echo
	echo "== GEMM"
	grep '^{' "$logs/16-bench-matmul.log" 2>/dev/null | tail -1
	grep '^{' "$logs/17-torch-mm.log" 2>/dev/null | tail -1
	echo
	echo "== memcompare"
	grep -v '^==' "$logs/18-memcompare-cuda.log" 2>/dev/null | grep -v '^ *$' | tail -12
	for f in 19-budget-resnet20-cuda 20-budget-gpt-cuda; do
		echo
		echo "== $f"
		grep -v '^==' "$logs/$f.log" 2>/dev/null | grep -v '^ *$' | tail -8
	done
} >>"$summary"
# The rows and ratios, when a Python is around.
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
def mib(b):
    return "%.1f MiB" % (b / 2**20) if isinstance(b, (int, float)) else "?"
def table(title, width, runs, row):
    """Prints title and a row per (label, log) of runs that has a summary; None when none has."""
    rows = [(label, last_json(name)) for label, name in runs]
    if not any(r for _, r in rows):
        return None
    print()
    print(title)
    for label, r in rows:
        print("%-*s %s" % (width, label, row(r) if r else "(no summary)"))
    return [r for _, r in rows]
def run_row(r):
    acc = r.get("test_accuracy")
    return "%-6s test accuracy %s  %8.0f samples/s  %6.2f ms/step  peak %s" % (
        r.get("device", "?"), "%.4f" % acc if isinstance(acc, (int, float)) else "null",
        r.get("samples_per_sec") or 0, r.get("ms_per_step") or 0, mib((r.get("peak_bytes") or {}).get("total")))
table("== measured: accuracy, speed and peak memory of each run", 20,
      [("MLP f16", "09-mnist-cuda-f16"), ("MLP bf16", "10-mnist-cuda-bf16"), ("CNN f16", "11-mnist-cnn-cuda-f16"),
       ("ResNet-20 f16", "12-resnet20-cuda-f16"), ("MLP f16 on the CPU", "21-mnist-cpu-f16")], run_row)
mp, tm = last_json("16-bench-matmul"), last_json("17-torch-mm")
if mp and tm:
    ours = {r["dtype"]: r["gpu_tflops"] for r in mp.get("results", [])}
    theirs = {r["dtype"]: r["tflops"] for r in tm.get("results", [])}
    print()
    print("== mixprec bench matmul vs torch.mm (n=%d): measured peaks" % mp["n"])
    for dt in ours:
        if dt in theirs and theirs[dt] > 0:
            print("%-5s mixprec %8.2f TFLOP/s  torch.mm %8.2f TFLOP/s  ratio %.2f" % (dt, ours[dt], theirs[dt], ours[dt] / theirs[dt]))
    if "f16" in ours and theirs.get("f16"):
        r = ours["f16"] / theirs["f16"]
        print("F16 at least 60%% of torch.mm: %s (%.0f%%)" % ("PASS" if r >= 0.6 else "FAIL", 100 * r))
gpts = table("== GPT -iters 200 -seed 1: losses and speed", 14,
             [("GPT fp32 cuda", "13-gpt-cuda-fp32"), ("GPT bf16 cuda", "14-gpt-cuda-bf16"), ("GPT fp32 cpu", "15-gpt-cpu-fp32")],
             lambda r: "train loss %r  val loss %r  %8.0f tokens/s  skipped %s" % (
                 r.get("train_loss"), r.get("val_loss"), r.get("tokens_per_sec") or 0, r.get("skipped_steps")))
if gpts:
    g, c = gpts[0], gpts[2]
    if g and c and isinstance(g.get("train_loss"), float) and isinstance(c.get("train_loss"), float):
        print("GPT fp32 train loss cuda - cpu: %.3g" % (g["train_loss"] - c["train_loss"]))
gpu, cpu = last_json("09-mnist-cuda-f16"), last_json("21-mnist-cpu-f16")
if gpu and cpu and isinstance(gpu.get("test_accuracy"), (int, float)) and isinstance(cpu.get("test_accuracy"), (int, float)):
    print()
    print("== MNIST -amp f16 -epochs 3: test accuracy cuda %.4f, cpu %.4f (difference %.4f); samples/s cuda %.0f, cpu %.0f"
          % (gpu["test_accuracy"], cpu["test_accuracy"], gpu["test_accuracy"] - cpu["test_accuracy"],
             gpu.get("samples_per_sec", 0), cpu.get("samples_per_sec", 0)))
PY
fi
# A completed run exits 0 whatever its steps returned: their statuses are in
# the summary, which is the result.
exit 0
