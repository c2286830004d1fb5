"""PyTorch peer: the MNIST CNN workload of mixprec's examples/mnist -model cnn.

The network of pytorch/examples' MNIST (conv 1->32 3x3, ReLU, conv 32->64 3x3,
ReLU, max-pool 2, dropout 0.25, linear 9216->128, ReLU, dropout 0.5, linear
128->10), AdamW lr 1e-3, batch 128, real MNIST.
  /usr/bin/python3 torch_mnist_cnn.py [--amp bf16] [--epochs N] [--max-steps N] [--threads T] [--json]
With --json the last line is one JSON object with the keys mixprec's examples
print, plus ms_per_step.
"""
import argparse, contextlib, json, os, sys, time
import torch
import torch.nn as nn
import torch.nn.functional as F
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mnist_data

p = argparse.ArgumentParser()
p.add_argument("--amp", choices=["off", "bf16"], default="off")
p.add_argument("--epochs", type=int, default=1)
p.add_argument("--max-steps", type=int, default=0)
p.add_argument("--threads", type=int, default=2)
p.add_argument("--batch", type=int, default=128)
p.add_argument("--json", action="store_true")
a = p.parse_args()
torch.set_num_threads(a.threads)
torch.manual_seed(0)

xtr, ytr, xte, yte = mnist_data.load()
xtr = torch.from_numpy(xtr.reshape(-1, 1, 28, 28)); ytr = torch.from_numpy(ytr)
xte = torch.from_numpy(xte.reshape(-1, 1, 28, 28)); yte = torch.from_numpy(yte)

model = nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Dropout(0.25), nn.Flatten(), nn.Linear(9216, 128), nn.ReLU(), nn.Dropout(0.5),
                      nn.Linear(128, 10))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
ctx = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if a.amp == "bf16" else contextlib.nullcontext
B, n = a.batch, xtr.shape[0]
steps, train_time, last_loss, samples = 0, 0.0, 0.0, 0
for ep in range(a.epochs):
    model.train()
    perm = torch.randperm(n)
    t = time.perf_counter(); tot = 0.0; nb = 0
    for i in range(0, n, B):
        idx = perm[i:i + B]
        with ctx():
            loss = F.cross_entropy(model(xtr[idx]), ytr[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        tot += loss.item(); nb += 1; samples += len(idx)
        if a.max_steps and steps + nb >= a.max_steps:
            break
    train_time += time.perf_counter() - t
    steps += nb; last_loss = tot / nb
    model.eval()
    with torch.no_grad(), ctx():
        acc = sum((model(xte[j:j + 1000]).float().argmax(1) == yte[j:j + 1000]).sum().item()
                  for j in range(0, len(yte), 1000)) / len(yte)
    if not a.json:
        print(f"epoch {ep+1}: {samples/train_time:.0f} samples/s  loss {last_loss:.4f}  test acc {acc*100:.2f}%")
    if a.max_steps and steps >= a.max_steps:
        break
summary = {"model": "cnn", "device": "cpu", "amp": a.amp, "framework": f"torch {torch.__version__}",
           "epochs": a.epochs, "steps": steps, "train_loss": last_loss, "test_accuracy": acc,
           "samples_per_sec": samples / train_time, "ms_per_step": 1000 * train_time / steps,
           "wall_seconds": train_time}
print(json.dumps(summary) if a.json else summary)
