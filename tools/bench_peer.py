"""Run mixprec's programs and their peers on the same workloads, on this
machine, in one invocation, and print the figures side by side with ratios.

  /usr/bin/python3 tools/bench_peer.py [--data DIR] [--bin DIR] [--repeat N]
      [--workloads mlp,cnn,wide,resnet20,gemm,gpt,gpt6x384] [--json FILE]

Peers:
  - PyTorch (Debian's python3-torch on OpenBLAS and oneDNN), run as a user who
    tuned it would run it: every workload under each thread setting
    {torch threads 1, cores} x {OpenBLAS threads default, 1}, and compared at
    its fastest, which is named ("torch 1 thread, OpenBLAS default"). torch's
    threads are set with torch.set_num_threads; OMP_NUM_THREADS is left unset
    because OpenBLAS would take it as its own thread count too. An
    OPENBLAS_CORETYPE in the environment is removed from the peer's (it can
    force older kernels: Haswell's AVX2 ones run F32 GEMMs at half the speed
    of the AVX-512 ones OpenBLAS 0.3.21 picks on a Zen 4), unless
    --keep-openblas-coretype. OpenBLAS's own pick is not trusted either:
    0.3.21 does not know an Emerald Rapids Xeon and falls back to its
    Prescott (SSE3) kernels, a quarter of the speed of its AVX-512 ones. So
    a short sgemm probe times its own pick beside each core type the CPU's
    flags allow (Cooperlake, SkylakeX, Haswell) and the peer runs with the
    fastest, named in the report.
  - Gorgonia and GoMLX (pure-Go backend) on the MLP: what a Go user would
    pick instead of mixprec (tools/gopeers/, each its own module).

Both sides train the same recipe (model, initialisation, optimiser,
schedule, batch, augmentation, data normalisation; see each peer's
docstring) and time the same thing: the training steps, without evaluation
or start-up. Our programs and the Go peers run with GOMAXPROCS = the number
of cores. Runs are interleaved (ours, a peer, ours, ...; the order rotates
every repeat) so that drift in the machine's speed hits every side alike;
each figure is the median over --repeat runs. Needs Debian's python3-torch
and python3-numpy (`make bench-peer` installs them and builds the binaries
into --bin).
"""
import argparse, json, os, re, statistics, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = "/usr/bin/python3"

# Steps for the workloads too slow to run for an epoch at every setting
# (--steps changes them); the GPT's are training iterations.
DEFAULT_STEPS = {"cnn": 60, "wide": 40, "resnet20": 30, "gpt": 200, "gpt6x384": 20}

# gpt6x384's model: nanoGPT's shakespeare_char shape (6 layers, 6 heads, 384
# wide, block 256) at batch 8, as flags of both programs.
GPT_LARGE = [("layers", 6), ("heads", 6), ("embd", 384), ("block", 256), ("batch", 8)]
GEMM_N, GEMM_REPS = 1024, 20


class Workload:
    """One workload: our command (binary name first) and the amp modes we
    run, the torch peer's script and arguments and its amp modes, the Go
    peers (binary names) and their arguments, what is measured, and what the
    figures mean (for the table's heading). rate is the summary key of the
    speed (in unit), quality that of the model's quality figure and its
    column's label; torch_data gives the peer's arguments that name the data
    directory's files."""

    def __init__(self, ours, our_modes, torch, torch_modes, about, go=(), go_args=(), unit="samples/s",
                 rate="samples_per_sec", quality=("test_accuracy", "acc"), torch_data=None):
        self.ours, self.our_modes = ours, our_modes
        self.torch, self.torch_modes = torch, torch_modes
        self.go, self.go_args = go, go_args
        self.unit, self.about = unit, about
        self.rate, self.quality = rate, quality
        self.torch_data = torch_data or (lambda data: [])


def austen_path(data):
    """Where mixprec's datasets.LoadText("austen") keeps the corpus under
    the data directory."""
    return os.path.join(data, "austen", "austen.txt")


def workloads(steps):
    """The workloads, the slow ones cut to steps[name] training steps."""
    cnn, wide, resnet, gpt, large = steps["cnn"], steps["wide"], steps["resnet20"], steps["gpt"], steps["gpt6x384"]
    return {
        "mlp": Workload(
            ["mnist", "-model", "mlp", "-epochs", "1", "-batch", "128"], ["off", "f16", "bf16"],
            ["torch_mnist_mlp.py", "--model", "mlp", "--epochs", "1"], ["off", "bf16"],
            "one epoch of 784-256-128-10, SGD momentum 0.9 lr 0.05, batch 128",
            go=["gorgonia", "gomlx"], go_args=["-epochs", "1"]),
        "wide": Workload(
            ["mnist", "-model", "wide", "-batch", "512", "-max-steps", str(wide)], ["off", "f16", "bf16"],
            ["torch_mnist_mlp.py", "--model", "wide", "--max-steps", str(wide)], ["off", "bf16"],
            f"{wide} steps of 784-4096-4096-10, SGD momentum 0.9 lr 0.02, batch 512"),
        "cnn": Workload(
            ["mnist", "-model", "cnn", "-epochs", "1", "-max-steps", str(cnn)], ["off", "f16", "bf16"],
            ["torch_mnist_cnn.py", "--epochs", "1", "--max-steps", str(cnn)], ["off", "bf16"],
            f"{cnn} steps of the MNIST CNN, one-cycle AdamW, 1-pixel shifts, batch 128"),
        "resnet20": Workload(
            ["cifar", "-synthetic", "-epochs", "1", "-max-steps", str(resnet)], ["off", "f16", "bf16"],
            ["torch_resnet20.py", "--max-steps", str(resnet)], ["off", "bf16"],
            f"{resnet} steps of ResNet-20 on synthetic CIFAR-shaped data, SGD Nesterov, cosine, crop+flip, batch 128"),
        "gemm": Workload(
            ["mixprec", "bench", "matmul", "-cpu-n", str(GEMM_N), "-cpu-reps", str(GEMM_REPS), "-dtypes", "f32,bf16", "-json"],
            ["f32", "bf16"],
            ["torch_mm_cpu.py", "--n", str(GEMM_N), "--reps", str(GEMM_REPS), "--dtypes", "f32,bf16"], ["f32", "bf16"],
            f"square GEMM n={GEMM_N}, every operand in the dtype, {GEMM_REPS} timed after warm-up",
            unit="GFLOP/s"),
        "gpt": Workload(
            ["gpt", "-corpus", "austen", "-iters", str(gpt)], ["off", "f16", "bf16"],
            ["torch_gpt.py", "--iters", str(gpt)], ["off", "bf16"],
            f"{gpt} iterations of the character GPT on Austen (4 layers, 4 heads, 128 wide, block 64, batch 12), "
            "nanoGPT's CPU recipe (AdamW groups, warm-up and cosine, clipping); val = the deterministic val loss",
            unit="tokens/s", rate="tokens_per_sec", quality=("val_loss", "val"),
            torch_data=lambda data: ["--text", austen_path(data)]),
        "gpt6x384": Workload(
            ["gpt", "-corpus", "austen", "-iters", str(large), "-eval-windows", "20"]
            + [x for k, v in GPT_LARGE for x in ("-" + k, str(v))], ["off", "f16", "bf16"],
            ["torch_gpt.py", "--iters", str(large), "--eval-windows", "20"]
            + [x for k, v in GPT_LARGE for x in ("--" + k, str(v))], ["off", "bf16"],
            f"{large} iterations of a larger character GPT on Austen (6 layers, 6 heads, 384 wide, block 256, batch 8), "
            "the same recipe; val = the deterministic val loss over 20 windows (still in the warm-up: a check, not a result)",
            unit="tokens/s", rate="tokens_per_sec", quality=("val_loss", "val"),
            torch_data=lambda data: ["--text", austen_path(data)]),
    }


WORKLOADS = workloads(DEFAULT_STEPS)

# The peer's modes that ratios are taken against: FP32 and BF16.
FP32_MODES, BF16_MODES = ("off", "f32"), ("bf16",)
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "MKL_NUM_THREADS")


class RunError(Exception):
    pass


def last_json(out):
    for line in reversed(out.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    raise RunError("no JSON summary in output:\n" + out[-2000:])


def run(cmd, env):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    if p.returncode != 0:
        raise RunError(f"{' '.join(cmd)} exited {p.returncode}:\n{(p.stderr or p.stdout)[-3000:]}")
    return last_json(p.stdout)


def torch_settings(cores):
    """The thread settings a user would try: (name, torch threads, the value
    of OPENBLAS_NUM_THREADS or None to leave OpenBLAS at its default)."""
    out = []
    for t in sorted({1, cores}):
        for ob in (None, "1"):
            name = f"torch {t} thread{'s' if t > 1 else ''}, OpenBLAS {'default' if ob is None else '1 thread'}"
            out.append((name, t, ob))
    return out


def torch_env(base, openblas, coretype=None):
    """The peer's environment: base without thread settings or
    OPENBLAS_CORETYPE, with OPENBLAS_NUM_THREADS set when openblas is not
    None and OPENBLAS_CORETYPE when coretype is not None."""
    env = {k: v for k, v in base.items() if k not in THREAD_VARS + ("OPENBLAS_CORETYPE",)}
    if openblas is not None:
        env["OPENBLAS_NUM_THREADS"] = openblas
    if coretype is not None:
        env["OPENBLAS_CORETYPE"] = coretype
    return env


# CORE_PROBE times 30 single-threaded 512^3 sgemms through torch.mm (best of
# 3 after a warm-up) and prints the seconds; OPENBLAS_VERBOSE=2 makes
# OpenBLAS name the core type it runs ("Core: Prescott").
CORE_PROBE = ("import time, torch\n"
              "torch.set_num_threads(1)\n"
              "a = torch.randn(512, 512); b = torch.randn(512, 512); torch.mm(a, b)\n"
              "best = 1e9\n"
              "for _ in range(3):\n"
              "    t = time.perf_counter()\n"
              "    for _ in range(30): torch.mm(a, b)\n"
              "    best = min(best, time.perf_counter() - t)\n"
              "print(best)\n")

# Core types OpenBLAS 0.3.21 has kernels for, with the CPU flag each needs.
CORE_TYPES = (("Cooperlake", "avx512_bf16"), ("SkylakeX", "avx512f"), ("Haswell", "avx2"))


def probe_openblas_core(base, flags, log):
    """Times OpenBLAS's own core choice and each core type the CPU's flags
    allow, and returns (the core type to set, or None for OpenBLAS's own
    choice, and a report of what was measured). Its own choice is kept
    unless another is at least 10% faster."""
    def probe(coretype):
        env = torch_env(base, "1", coretype)
        env["OPENBLAS_VERBOSE"] = "2"
        p = subprocess.run([PY, "-c", CORE_PROBE], capture_output=True, text=True, env=env, cwd=ROOT)
        m = re.search(r"Core: (\S+)", p.stdout + p.stderr)
        try:
            secs = float(p.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            return (m.group(1) if m else None), None
        return (m.group(1) if m else None), 30 * 2 * 512**3 / secs / 1e9
    own, own_gf = probe(None)
    report = {"own_choice": own or "unknown", "gflops": {f"own choice ({own or 'unknown'})": own_gf}}
    if own_gf is None:
        report["chosen"] = "OpenBLAS's own choice (the probe failed)"
        return None, report
    best, best_gf = None, own_gf
    for name, flag in CORE_TYPES:
        if flag not in flags or name == own:
            continue
        got, gf = probe(name)
        report["gflops"][name] = gf
        if gf is not None and got == name and gf > 1.1 * best_gf:
            best, best_gf = name, gf
    report["chosen"] = best or f"OpenBLAS's own choice ({own or 'unknown'})"
    log(f"bench-peer: OpenBLAS core probe (1 thread, 512^3 sgemm, GFLOP/s): "
        + ", ".join(f"{k} {v:.0f}" if v else f"{k} failed" for k, v in report["gflops"].items())
        + f"; the peer runs with {report['chosen']}")
    return best, report


def interleave(ours, peers, shift):
    """Spreads our jobs evenly among the peers' (ours first), after rotating
    both lists by shift, so that no job always runs at the same point of a
    repeat."""
    if ours:
        ours = ours[shift % len(ours):] + ours[:shift % len(ours)]
    if peers:
        peers = peers[shift % len(peers):] + peers[:shift % len(peers)]
    out, n = [], len(ours)
    for i, job in enumerate(ours):
        out.append(job)
        lo, hi = i * len(peers) // n, (i + 1) * len(peers) // n
        out.extend(peers[lo:hi])
    if not ours:
        out.extend(peers)
    return out


class Figures:
    """Per (side, setting, mode): the measurements of every repeat."""

    def __init__(self):
        self.runs = {}

    def add(self, key, s):
        self.runs.setdefault(key, []).append(s)

    def median(self, key, field):
        vals = [s[field] for s in self.runs.get(key, []) if s.get(field) is not None]
        return statistics.median(vals) if vals else None


def fastest(figs, keys):
    """The key with the highest median rate among keys, or None."""
    best = None
    for k in keys:
        v = figs.median(k, "rate")
        if v is not None and (best is None or v > figs.median(best, "rate")):
            best = k
    return best


def jobs_for(name, w, a, env_ours, settings):
    """The runs of one repeat: ours, the torch peer's and the Go peers', each
    a (key, command, env, parse) where parse turns the run's JSON into a list
    of (mode, summary with "rate")."""
    ours, peers = [], []
    binary = os.path.join(a.bin, w.ours[0])
    if name == "gemm":
        def parse_ours(s):
            return [(r["dtype"].lower(), {"rate": 1000 * r["cpu_tflops"], "seconds": r.get("cpu_seconds_per_gemm")})
                    for r in s["results"]]
        ours.append((("mixprec", "", "*"), [binary] + w.ours[1:], env_ours, parse_ours))

        def parse_torch(s):
            return [(r["dtype"], {"rate": r["cpu_gflops"], "seconds": r["cpu_seconds_per_gemm"],
                                  "framework": s["framework"]}) for r in s["results"]]
        for setting, t, ob in settings:
            cmd = [PY, os.path.join(HERE, "peers", w.torch[0])] + w.torch[1:] + ["--threads", str(t), "--json"]
            peers.append((("torch", setting, "*"), cmd, torch_env(env_ours, ob, a.openblas_core), parse_torch))
        return ours, peers

    def parse_run(mode):
        def parse(s):
            s = dict(s)
            s["rate"] = s[w.rate]
            return [(mode, s)]
        return parse
    for mode in w.our_modes:
        cmd = [binary] + w.ours[1:] + ["-data", a.data, "-amp", mode, "-json"]
        ours.append((("mixprec", "", mode), cmd, env_ours, parse_run(mode)))
    for setting, t, ob in settings:
        for mode in w.torch_modes:
            cmd = ([PY, os.path.join(HERE, "peers", w.torch[0])] + w.torch[1:] + w.torch_data(a.data) +
                   ["--amp", mode, "--threads", str(t), "--json"])
            peers.append((("torch", setting, mode), cmd, torch_env(env_ours, ob, a.openblas_core), parse_run(mode)))
    for g in w.go:
        cmd = [os.path.join(a.bin, "gopeer-" + g)] + list(w.go_args) + ["-data", a.data, "-json"]
        if a.go_peer_steps:
            cmd += ["-max-steps", str(a.go_peer_steps)]
        peers.append(((g, "", "off"), cmd, env_ours, parse_run("off")))
    return ours, peers


def measure(name, w, a, env_ours, settings, unavailable, log):
    figs = Figures()
    for r in range(a.repeat):
        ours, peers = jobs_for(name, w, a, env_ours, settings)
        for key, cmd, env, parse in interleave(ours, peers, r):
            side = key[0]
            if side in unavailable:
                continue
            if side in w.go and not os.path.exists(cmd[0]):
                unavailable[side] = f"{cmd[0]} was not built (make bench-peer builds it)"
                continue
            log(f"[{name} {r + 1}/{a.repeat}] {' '.join(os.path.basename(c) if i == 0 else c for i, c in enumerate(cmd))}"
                + (f"  (OPENBLAS_NUM_THREADS={env['OPENBLAS_NUM_THREADS']})" if "OPENBLAS_NUM_THREADS" in env else ""))
            try:
                out = run(cmd, env)
            except (RunError, OSError, ValueError, KeyError) as e:
                if side in w.go:
                    unavailable[side] = str(e).strip().splitlines()[-1][:300]
                    continue
                raise
            for mode, s in parse(out):
                figs.add((key[0], key[1], mode), s)
    return figs


def rows_for(name, w, figs, settings, unavailable, cores):
    """The table rows of one workload: ours per mode, the fastest torch
    setting per mode (named), the Go peers; each with ratios against the
    fastest torch FP32 and BF16."""
    torch_modes = w.torch_modes
    best = {m: fastest(figs, [("torch", s, m) for s, _, _ in settings]) for m in torch_modes}
    fp32 = next((best[m] for m in torch_modes if m in FP32_MODES and best.get(m)), None)
    bf16 = next((best[m] for m in torch_modes if m in BF16_MODES and best.get(m)), None)
    base32 = figs.median(fp32, "rate") if fp32 else None
    base16 = figs.median(bf16, "rate") if bf16 else None

    def row(framework, setting, mode, key):
        v = figs.median(key, "rate")
        r = {"workload": name, "framework": framework, "setting": setting, "amp": mode, "unit": w.unit,
             "median": v, "runs": [s["rate"] for s in figs.runs.get(key, [])],
             "ms_per_step": figs.median(key, "ms_per_step"), "test_accuracy": figs.median(key, "test_accuracy"),
             "val_loss": figs.median(key, "val_loss"),
             "train_loss": figs.median(key, "train_loss"),
             "vs_torch_fp32": v / base32 if v and base32 else None,
             "vs_torch_bf16": v / base16 if v and base16 else None}
        return r
    rows = []
    for mode in w.our_modes:
        rows.append(row("mixprec", f"GOMAXPROCS={cores}", mode, ("mixprec", "", mode)))
    torch_name = next((s["framework"] for k, v in figs.runs.items() if k[0] == "torch" for s in v if "framework" in s), "torch")
    for mode in torch_modes:
        if best.get(mode):
            rows.append(row(torch_name, best[mode][1], mode, best[mode]))
    for g in w.go:
        key = (g, "", "off")
        if g in unavailable:
            rows.append({"workload": name, "framework": g, "setting": "", "amp": "off", "unit": w.unit,
                         "median": None, "unavailable": unavailable[g]})
        elif key in figs.runs:
            r = row(figs.runs[key][0].get("framework", g), f"GOMAXPROCS={cores}", "off", key)
            rows.append(r)
    settings_table = []
    for s, t, ob in settings:
        for mode in torch_modes:
            key = ("torch", s, mode)
            if key in figs.runs:
                settings_table.append({"setting": s, "torch_threads": t, "openblas_threads": ob or "default",
                                       "amp": mode, "median": figs.median(key, "rate"),
                                       "runs": [x["rate"] for x in figs.runs[key]],
                                       "fastest": best.get(mode) == key})
    return rows, settings_table


def fmt(v, nd=0):
    if v is None:
        return "-"
    return f"{v:,.{nd}f}"


def ratio(v):
    return "-" if v is None else f"{v:.2f}x"


def print_tables(report, out):
    m = report["machine"]
    print(f"\nbench-peer: {m['cpu']}, {m['cores']} cores; {report['torch']}; medians of {report['repeat']} "
          f"interleaved runs; load average at start {m['load_start']}, at end {m['load_end']}", file=out)
    if report.get("go_peer_steps"):
        print(f"(the Go peers stopped after {report['go_peer_steps']} steps: their accuracy is not comparable)", file=out)
    if m.get("openblas_coretype"):
        print(f"(OpenBLAS core type: {m['openblas_coretype']})", file=out)
    for name, wl in report["workloads"].items():
        if wl.get("unavailable"):
            print(f"\n{name}: {wl['about']}\n  unavailable: {wl['unavailable']}", file=out)
            continue
        qkey, qlabel = wl.get("quality", ("test_accuracy", "acc"))
        print(f"\n{name}: {wl['about']} ({wl['unit']}; timed: {wl['timed']})", file=out)
        print(f"  {'framework':28} {'amp':5} {wl['unit']:>11} {'ms/step':>8} {qlabel:>6} "
              f"{'vs torch fp32':>13} {'vs torch bf16':>13}  setting", file=out)
        for r in wl["rows"]:
            if r.get("unavailable"):
                print(f"  {r['framework']:28} {r['amp']:5} unavailable: {r['unavailable']}", file=out)
                continue
            acc = "-" if r.get(qkey) is None else f"{r[qkey]:.4f}"
            print(f"  {r['framework']:28} {r['amp']:5} {fmt(r['median'], 0 if r['median'] and r['median'] > 100 else 1):>11} "
                  f"{fmt(r.get('ms_per_step'), 1):>8} {acc:>6} {ratio(r.get('vs_torch_fp32')):>13} "
                  f"{ratio(r.get('vs_torch_bf16')):>13}  {r['setting']}", file=out)
        if wl["torch_settings"]:
            print("  torch under each thread setting (medians; * the fastest):", file=out)
            for s in wl["torch_settings"]:
                print(f"    {s['setting']:38} {s['amp']:5} {fmt(s['median'], 1):>11}{' *' if s['fastest'] else ''}", file=out)


def prepare(name, w, a, env, log):
    """Makes sure a workload can run: our program is built and, for the
    GPT, the Austen corpus is in the data directory (our program fetches
    and checks it; the peer only reads it). Returns why it cannot, or None."""
    binary = os.path.join(a.bin, w.ours[0])
    if not os.path.exists(binary):
        return f"{binary} was not built (make bench-peer builds it)"
    if name == "gpt" and not os.path.exists(austen_path(a.data)):
        log(f"bench-peer: gpt: fetching the Austen corpus into {os.path.dirname(austen_path(a.data))}")
        why = f"{binary} -corpus austen left no {austen_path(a.data)}"
        try:
            run([binary, "-corpus", "austen", "-data", a.data, "-iters", "0", "-eval-windows", "1", "-json"], env)
        except (RunError, OSError, ValueError) as e:
            why = f"the Austen corpus could not be fetched: {str(e).strip().splitlines()[-1][:300]}"
        if not os.path.exists(austen_path(a.data)):
            return why
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=os.environ.get("MIXPREC_DATA", os.path.join(ROOT, "data")))
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--cores", type=int, default=os.cpu_count(),
                    help="GOMAXPROCS for our programs and the Go peers; torch tries 1 and this many threads")
    ap.add_argument("--workloads", default="mlp")
    ap.add_argument("--bin", default=os.path.join(ROOT, "bin"))
    ap.add_argument("--json", metavar="FILE", help="also write the tables as JSON to FILE ('-': standard output, last line)")
    ap.add_argument("--steps", metavar="NAME=N,...",
                    help="training steps of the workloads cut short (default " +
                         ",".join(f"{k}={v}" for k, v in DEFAULT_STEPS.items()) + ")")
    ap.add_argument("--go-peer-steps", type=int, default=0, metavar="N",
                    help="stop the Go peers after N steps instead of an epoch (GoMLX takes minutes per epoch); "
                         "their accuracy is then not comparable")
    ap.add_argument("--keep-openblas-coretype", action="store_true",
                    help="pass OPENBLAS_CORETYPE on to PyTorch instead of letting OpenBLAS pick its kernels")
    ap.add_argument("--quiet", action="store_true", help="do not log each run on standard error")
    a = ap.parse_args()
    steps = dict(DEFAULT_STEPS)
    for item in filter(None, (x.strip() for x in (a.steps or "").split(","))):
        k, _, v = item.partition("=")
        if k not in steps or not v.isdigit() or int(v) < 1:
            sys.exit(f"bench-peer: --steps {item!r}: want NAME=N with NAME one of {', '.join(steps)} and N >= 1")
        steps[k] = int(v)
    table = workloads(steps)
    names = [w.strip() for w in a.workloads.split(",") if w.strip()]
    for w in names:
        if w not in table:
            sys.exit(f"bench-peer: unknown workload {w!r} (have {', '.join(table)})")
    if a.repeat < 1:
        sys.exit("bench-peer: --repeat must be >= 1")
    # Some machines set OPENBLAS_CORETYPE (and OPENBLAS_L2_SIZE) to pin an
    # older kernel: on this project's Zen machines it made OpenBLAS run its
    # Haswell (AVX2) kernels at half the speed of the AVX-512 ones it picks
    # itself (Cooperlake; results checked against float64). Both are dropped
    # for every run, and the peer gets the fastest core type the probe finds
    # (OpenBLAS's own choice unless another is clearly faster).
    pinned = {k: os.environ.pop(k) for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if k in os.environ}
    env_ours = dict(os.environ, MNIST_DIR=os.path.join(a.data, "mnist"), MIXPREC_DATA=a.data, GOMAXPROCS=str(a.cores))
    settings = torch_settings(a.cores)
    log = (lambda s: None) if a.quiet else (lambda s: print(s, file=sys.stderr, flush=True))

    torch_version = subprocess.run([PY, "-c", "import torch; print(torch.__version__)"],
                                   capture_output=True, text=True).stdout.strip() or "unavailable"
    report = {"repeat": a.repeat, "torch": f"PyTorch {torch_version}", "machine": machine(a.cores),
              "go_peer_steps": a.go_peer_steps, "steps": steps,
              "keep_openblas_coretype": a.keep_openblas_coretype, "workloads": {}}
    report["machine"]["dropped_env"] = pinned
    if a.keep_openblas_coretype:
        a.openblas_core = pinned.get("OPENBLAS_CORETYPE")
        report["machine"]["openblas_coretype"] = a.openblas_core or "(OpenBLAS's own choice)"
    else:
        a.openblas_core, probe = probe_openblas_core(env_ours, cpu_flags(), log)
        report["machine"]["openblas_probe"] = probe
        report["machine"]["openblas_coretype"] = (
            f"{a.openblas_core} (set: OpenBLAS picks {probe['own_choice']} on this CPU; "
            + ", ".join(f"{k} {v:.0f}" for k, v in probe["gflops"].items() if v) + " GFLOP/s in a 1-thread 512^3 sgemm probe)"
            if a.openblas_core else probe["chosen"])
    unavailable = {}
    for name in names:
        w = table[name]
        missing = prepare(name, w, a, env_ours, log)
        if missing:
            log(f"bench-peer: {name}: {missing}; skipping the workload")
            report["workloads"][name] = {"about": w.about, "unit": w.unit, "unavailable": missing}
            continue
        try:
            figs = measure(name, w, a, env_ours, settings, unavailable, log)
        except (RunError, OSError) as e:
            sys.exit(f"bench-peer: {name}: {e}")
        rows, st = rows_for(name, w, figs, settings, unavailable, a.cores)
        report["workloads"][name] = {"about": w.about, "unit": w.unit, "quality": list(w.quality), "rows": rows,
                                     "torch_settings": st,
                                     "timed": "GEMM calls" if name == "gemm" else "training steps (no evaluation, no start-up)"}
    report["machine"]["load_end"] = load()
    print_tables(report, sys.stdout)
    if a.json == "-":
        print(json.dumps(report))
    elif a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)
        print(f"\nbench-peer: JSON in {a.json}")


def load():
    try:
        return " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        return "unknown"


def cpu_flags():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def machine(cores):
    cpu = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    flags = cpu_flags()
    feats = [f for f in ("avx2", "avx512f", "avx512_bf16", "avx512_fp16") if f in flags]
    return {"cpu": f"{cpu} ({' '.join(feats)})" if feats else cpu, "cores": cores, "load_start": load(),
            "date": time.strftime("%Y-%m-%d %H:%M:%S")}


if __name__ == "__main__":
    main()
