#!/usr/bin/env python3
"""torch_mm.py: times torch.mm on the GPU for the sizes and dtypes of
`mixprec bench matmul`, the reference for its "F16 at least 60% of
torch.mm" check.

Every operand is in the dtype (as mixprec's bench), F32 runs with TF32 off
(torch.backends.cuda.matmul.allow_tf32 = False, PyTorch's default since
1.12, and mixprec's), and the time is CUDA events around reps calls after
warm-up ones. TFLOP/s = 2 n^3 / time.

    python3 torch_mm.py [--n 4096] [--dtypes f32,f16,bf16] [--reps 20] [--json]

Exits 2, saying why, when PyTorch or a CUDA device is missing.
"""

import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--dtypes", default="f32,f16,bf16")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    try:
        import torch
    except ImportError as e:
        print(f"torch_mm: PyTorch unavailable: {e}")
        return 2
    if not torch.cuda.is_available():
        print(f"torch_mm: PyTorch {torch.__version__} sees no CUDA device")
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    dtypes = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
    n = args.n
    gen = torch.Generator(device="cuda").manual_seed(0)
    report = {
        "n": n,
        "reps": args.reps,
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "results": [],
    }
    for name in args.dtypes.split(","):
        name = name.strip()
        dt = dtypes[name]
        a = (torch.rand(n, n, device="cuda", generator=gen) * 2 - 1).to(dt)
        b = (torch.rand(n, n, device="cuda", generator=gen) * 2 - 1).to(dt)
        c = torch.empty(n, n, device="cuda", dtype=dt)
        for _ in range(args.warmup):
            torch.mm(a, b, out=c)
        torch.cuda.synchronize()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(args.reps):
            torch.mm(a, b, out=c)
        end.record()
        end.synchronize()
        sec = start.elapsed_time(end) / 1e3 / args.reps
        report["results"].append({"dtype": name, "tflops": 2 * n**3 / sec / 1e12, "seconds_per_gemm": sec})
    if args.json:
        print(json.dumps(report))
    else:
        print(f"torch.mm on {report['gpu']} (PyTorch {report['torch']}, CUDA {report['cuda']}), n={n}, {args.reps} reps, TF32 off")
        print(f"{'dtype':6} {'TFLOP/s':>10}")
        for r in report["results"]:
            print(f"{r['dtype']:6} {r['tflops']:10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
