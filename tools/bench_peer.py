"""Run mixprec's examples and the PyTorch peers on the same workloads, on this
machine, in one invocation, and print samples/s for each and their ratio.

  /usr/bin/python3 tools/bench_peer.py [--data DIR] [--repeat N] [--workloads mlp,cnn]

Runs alternate (ours, PyTorch, ours, ...) so that drift in the machine's speed
hits both sides alike; each figure is the median over --repeat runs. Needs
Debian's python3-torch and python3-numpy (`make bench-peer` installs them).
"""
import argparse, json, os, statistics, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# name -> (our command, peer command, amp modes for us, amp modes for the peer)
WORKLOADS = {
    "mlp": (["examples/mnist", "-model", "mlp", "-epochs", "1"],
            ["torch_mnist_mlp.py", "--epochs", "1"],
            ["off", "f16", "bf16"], ["off", "bf16"]),
    "cnn": (["examples/mnist", "-model", "cnn", "-epochs", "1", "-max-steps", "60"],
            ["torch_mnist_cnn.py", "--epochs", "1", "--max-steps", "60"],
            ["off", "f16", "bf16"], ["off", "bf16"]),
}


def last_json(out):
    for line in reversed(out.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    raise ValueError("no JSON summary in output:\n" + out[-2000:])


def run(cmd, env):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    if p.returncode != 0:
        sys.exit(f"bench-peer: {' '.join(cmd)} failed:\n{p.stderr[-3000:]}")
    return last_json(p.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.environ.get("MIXPREC_DATA", os.path.join(ROOT, "data")))
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--workloads", default="mlp")
    ap.add_argument("--bin", default=os.path.join(ROOT, "bin"))
    a = ap.parse_args()
    env = dict(os.environ, MNIST_DIR=os.path.join(a.data, "mnist"), GOMAXPROCS=str(a.threads))
    rows = []
    for w in a.workloads.split(","):
        ours, peer, our_amps, peer_amps = WORKLOADS[w]
        binary = os.path.join(a.bin, os.path.basename(ours[0]))
        figures = {}
        for _ in range(a.repeat):
            for amp in our_amps:
                s = run([binary] + ours[1:] + ["-data", a.data, "-amp", amp, "-json"], env)
                figures.setdefault(("mixprec", amp), []).append((s["samples_per_sec"], s.get("ms_per_step", 0)))
            for amp in peer_amps:
                s = run(["/usr/bin/python3", os.path.join(HERE, "peers", peer[0])] + peer[1:] +
                        ["--amp", amp, "--threads", str(a.threads), "--json"], env)
                figures.setdefault(("torch", amp), []).append((s["samples_per_sec"], s.get("ms_per_step", 0)))
                torch_version = s.get("framework", "torch")
        med = {k: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)) for k, v in figures.items()}
        base = med[("torch", "off")][0]
        for (who, amp), (v, ms) in sorted(med.items(), key=lambda kv: (kv[0][0] != "mixprec", kv[0][1])):
            name = "mixprec" if who == "mixprec" else torch_version
            rows.append((w, name, amp, v, ms, v / base))
    print(f"{'workload':8} {'framework':22} {'amp':5} {'samples/s':>10} {'ms/step':>8} {'vs torch fp32':>14}")
    for w, name, amp, v, ms, r in rows:
        print(f"{w:8} {name:22} {amp:5} {v:10.0f} {ms:8.1f} {r:13.2f}x")


if __name__ == "__main__":
    main()
