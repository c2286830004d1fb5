"""PyTorch peer: the MNIST CNN workload of mixprec's examples/mnist -model cnn.

The network of pytorch/examples' MNIST (conv 1->32 3x3, ReLU, conv 32->64
3x3, ReLU, max-pool 2, dropout 0.25, linear 9216->128, ReLU, dropout 0.5,
linear 128->10), trained with mixprec's recipe for it: AdamW (lr peak 3e-3,
weight decay 0.01, betas 0.9/0.999, eps 1e-8) under a one-cycle schedule
(start peak/25, peak at a quarter of the run, end peak/25e4, cosine
annealing, no momentum cycling) over the steps the run takes, every image
moved by up to 1 pixel each way with the uncovered strip filled with the
normalised black, batch 128, real MNIST.

  /usr/bin/python3 torch_mnist_cnn.py [--amp off|bf16] [--epochs N] [--max-steps N]
      [--threads T] [--json]

The timed part is the training steps alone (batch gather, augmentation,
forward, loss, backward, update, reading the loss), as in mixprec's
examples; evaluation on the test set is not timed. With --json the last
line is one JSON object with the keys mixprec's examples print.
"""
import argparse, contextlib, os, sys, time
import torch
import torch.nn as nn
import torch.nn.functional as F
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common, mnist_data

p = argparse.ArgumentParser()
p.add_argument("--amp", choices=["off", "bf16"], default="off")
p.add_argument("--epochs", type=int, default=1)
p.add_argument("--max-steps", type=int, default=0)
p.add_argument("--threads", type=int, default=1)
p.add_argument("--batch", type=int, default=128)
p.add_argument("--lr", type=float, default=3e-3)
p.add_argument("--shift", type=int, default=1)
p.add_argument("--json", action="store_true")
a = p.parse_args()
threads = common.setup_threads(a.threads)
torch.manual_seed(0)

xtr, ytr, xte, yte = mnist_data.load()
xtr = torch.from_numpy(xtr.reshape(-1, 1, 28, 28)); ytr = torch.from_numpy(ytr)
xte = torch.from_numpy(xte.reshape(-1, 1, 28, 28)); yte = torch.from_numpy(yte)
black = (0 - mnist_data.MEAN) / mnist_data.STD

model = nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Dropout(0.25), nn.Flatten(), nn.Linear(9216, 128), nn.ReLU(), nn.Dropout(0.5),
                      nn.Linear(128, 10))
opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=1e-2)
ctx = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if a.amp == "bf16" else contextlib.nullcontext
B, n = a.batch, xtr.shape[0]
per_epoch = (n + B - 1) // B
total = per_epoch * a.epochs
if a.max_steps:
    total = min(total, a.max_steps)
schedule = common.one_cycle(a.lr, total)
steps, train_time, last_loss, samples, acc = 0, 0.0, 0.0, 0, 0.0
for ep in range(a.epochs):
    model.train()
    perm = torch.randperm(n)
    t = time.perf_counter(); tot = 0.0; nb = 0
    for i in range(0, n, B):
        idx = perm[i:i + B]
        common.set_lr(opt, schedule(steps + nb))
        x = common.shift_batch(xtr[idx], a.shift, black)
        with ctx():
            loss = F.cross_entropy(model(x), ytr[idx])
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
common.emit(common.summary("cnn", a.amp, threads, steps, samples, train_time, last_loss, acc, a.epochs,
                           {"batch": B, "lr": a.lr}), a.json)
