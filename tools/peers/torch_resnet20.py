"""PyTorch peer: mixprec's examples/cifar -synthetic, ResNet-20 on random data
of CIFAR-10's shapes, for speed only.

The network of mixprec's nn/models.ResNet20 (He et al. 2016, n = 3): a 3x3
stem of 16 channels without bias, batch norm and ReLU; three stages of three
BasicBlocks at 16, 32 and 64 channels, the last two starting with stride 2
and a 1x1 convolution plus batch norm as the projection shortcut; global
average pooling and a 64->10 linear layer. Batch norm momentum 0.1, eps
1e-5. The recipe of examples/cifar: SGD with Nesterov momentum 0.9, weight
decay 5e-4 on every parameter, lr 0.1 with a linear warm-up over
min(an epoch, a tenth of the run) and a cosine decay to 0 at the end of the
run, batch 128 with the last partial batch dropped, random 4-pixel crops
and horizontal flips. The data are standard normal images and uniform
labels, as datasets.Synthetic makes them, and only as many as the run uses.

  /usr/bin/python3 torch_resnet20.py [--amp off|bf16] [--max-steps N] [--threads T] [--json]

The timed part is the training steps alone (batch gather, augmentation,
forward, loss, backward, update, reading the loss); evaluation is not timed.
With --json the last line is one JSON object with the keys mixprec's
examples print, and "data": "synthetic".
"""
import argparse, contextlib, os, sys, time
import torch
import torch.nn as nn
import torch.nn.functional as F
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = None
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, 0, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        h = self.bn2(self.conv2(h))
        return F.relu(h + (x if self.shortcut is None else self.shortcut(x)))


def resnet20(classes=10):
    def stage(cin, cout, stride):
        return nn.Sequential(BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1), BasicBlock(cout, cout, 1))
    return nn.Sequential(
        nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU()),
        stage(16, 16, 1), stage(16, 32, 2), stage(32, 64, 2),
        nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, classes)))


p = argparse.ArgumentParser()
p.add_argument("--amp", choices=["off", "bf16"], default="off")
p.add_argument("--epochs", type=int, default=1)
p.add_argument("--max-steps", type=int, default=0)
p.add_argument("--threads", type=int, default=1)
p.add_argument("--batch", type=int, default=128)
p.add_argument("--lr", type=float, default=0.1)
p.add_argument("--wd", type=float, default=5e-4)
p.add_argument("--json", action="store_true")
a = p.parse_args()
threads = common.setup_threads(a.threads)
torch.manual_seed(0)

B = a.batch
n = 50000
if a.max_steps:
    n = min(n, a.max_steps * B)
xtr = torch.randn(n, 3, 32, 32)
ytr = torch.randint(0, 10, (n,))
xte = torch.randn(1000, 3, 32, 32)
yte = torch.randint(0, 10, (1000,))

model = resnet20()
opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9, nesterov=True, weight_decay=a.wd)
ctx = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if a.amp == "bf16" else contextlib.nullcontext
per_epoch = n // B
total = per_epoch * a.epochs
if a.max_steps:
    total = min(total, a.max_steps)
schedule = common.cosine(a.lr, min(per_epoch, total // 10), total)
steps, train_time, last_loss, acc = 0, 0.0, 0.0, 0.0
for ep in range(a.epochs):
    model.train()
    perm = torch.randperm(n)
    t = time.perf_counter(); tot = 0.0; nb = 0
    for i in range(0, per_epoch * B, B):
        idx = perm[i:i + B]
        common.set_lr(opt, schedule(steps + nb))
        x = common.crop_flip_batch(xtr[idx], 4)
        with ctx():
            loss = F.cross_entropy(model(x), ytr[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        tot += loss.item(); nb += 1
        if steps + nb >= total:
            break
    train_time += time.perf_counter() - t
    steps += nb; last_loss = tot / nb
    model.eval()
    with torch.no_grad(), ctx():
        acc = sum((model(xte[j:j + 500]).float().argmax(1) == yte[j:j + 500]).sum().item()
                  for j in range(0, len(yte), 500)) / len(yte)
    if not a.json:
        print(f"[synthetic data] epoch {ep+1}: {steps*B/train_time:.0f} samples/s  "
              f"{1000*train_time/steps:.1f} ms/step  loss {last_loss:.4f}")
    if steps >= total:
        break
common.emit(common.summary("resnet20", a.amp, threads, steps, steps * B, train_time, last_loss, acc, a.epochs,
                           {"data": "synthetic", "batch": B, "lr": a.lr}), a.json)
