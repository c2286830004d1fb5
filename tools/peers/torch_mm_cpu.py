"""PyTorch peer of `mixprec bench matmul -cpu-n N`: times torch.mm on the CPU.

Square C = A*B with every operand in the dtype (as mixprec's bench): F32
goes to the BLAS torch links (Debian's: OpenBLAS), BF16 to oneDNN, which
uses the CPU's AVX512_BF16 dot products where it has them. Operands are
uniform in [-1, 1); each dtype gets --warmup untimed calls and more until
--warmup-seconds have passed (1 s, as mixprec's bench: a vCPU that sat idle
runs slow for a while), then --reps timed ones, wall clock; GFLOP/s =
2 n^3 / time.

    /usr/bin/python3 torch_mm_cpu.py [--n 1024] [--dtypes f32,bf16] [--reps 20] [--threads T] [--json]

--threads sets torch.set_num_threads; OpenBLAS's own threads follow
OPENBLAS_NUM_THREADS, which the caller sets or leaves alone. With --json the
last line is one JSON object: {"framework", "n", "threads", "results":
[{"dtype", "cpu_gflops", "cpu_seconds_per_gemm"}]}.
"""
import argparse, json, time
import torch

p = argparse.ArgumentParser()
p.add_argument("--n", type=int, default=1024)
p.add_argument("--dtypes", default="f32,bf16")
p.add_argument("--reps", type=int, default=20)
p.add_argument("--warmup", type=int, default=3)
p.add_argument("--warmup-seconds", type=float, default=1.0)
p.add_argument("--threads", type=int, default=1)
p.add_argument("--json", action="store_true")
a = p.parse_args()
torch.set_num_threads(a.threads)
gen = torch.Generator().manual_seed(0)
names = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
n = a.n
report = {"framework": f"torch {torch.__version__}", "n": n, "threads": a.threads, "reps": a.reps, "results": []}
for name in a.dtypes.split(","):
    dt = names[name.strip()]
    x = (torch.rand(n, n, generator=gen) * 2 - 1).to(dt)
    y = (torch.rand(n, n, generator=gen) * 2 - 1).to(dt)
    c = torch.empty(n, n, dtype=dt)
    start, done = time.perf_counter(), 0
    while done < a.warmup or time.perf_counter() - start < a.warmup_seconds:
        torch.mm(x, y, out=c)
        done += 1
    t = time.perf_counter()
    for _ in range(a.reps):
        torch.mm(x, y, out=c)
    sec = (time.perf_counter() - t) / a.reps
    report["results"].append({"dtype": name.strip(), "cpu_gflops": 2 * n**3 / sec / 1e9, "cpu_seconds_per_gemm": sec})
if a.json:
    print(json.dumps(report))
else:
    print(f"torch.mm on the CPU ({report['framework']}, {a.threads} torch threads), n={n}, {a.reps} reps")
    for r in report["results"]:
        print(f"{r['dtype']:5} {r['cpu_gflops']:8.1f} GFLOP/s")
