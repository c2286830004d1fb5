"""What the PyTorch peers share: thread set-up, the augmentations of
mixprec's data loader written as whole-batch tensor operations, mixprec's
learning-rate schedules, and the JSON summary line mixprec's examples print.

The augmentations are the ones datasets.RandomShift and
datasets.RandomCropFlip apply per sample; here they run on the whole batch
at once (one pad and one gather), as a PyTorch user who tuned the loop would
write them, rather than per-image torchvision transforms.
"""
import json, math, os
import torch
import torch.nn.functional as F


def setup_threads(threads):
    """Sets torch's intra-op threads. OpenBLAS's own threads follow
    OPENBLAS_NUM_THREADS (or, unset, its default: one per core), which the
    caller sets in the environment; the settings are reported in the summary."""
    torch.set_num_threads(threads)
    return {"threads": threads, "openblas_threads": os.environ.get("OPENBLAS_NUM_THREADS", "default")}


def shift_batch(x, max_shift, fill, gen=None):
    """Moves each image of x (N, C, H, W) by dy, dx uniform in
    [-max_shift, max_shift] (independently per image), filling what is
    uncovered with fill: datasets.RandomShift."""
    n, c, h, w = x.shape
    if max_shift == 0:
        return x
    p = F.pad(x, (max_shift,) * 4, value=fill)
    # Output row y of an image moved down by dy is padded row y - dy + max_shift.
    top = torch.randint(0, 2 * max_shift + 1, (n,), generator=gen)
    left = torch.randint(0, 2 * max_shift + 1, (n,), generator=gen)
    return _gather(p, top, left, h, w, None)


def crop_flip_batch(x, pad, gen=None):
    """Pads each image of x (N, C, H, W) with pad zeros each side, keeps an
    H x W window at a uniformly random offset and mirrors it left to right
    with probability 0.5: datasets.RandomCropFlip (torchvision's RandomCrop
    with padding, then RandomHorizontalFlip)."""
    n, c, h, w = x.shape
    p = F.pad(x, (pad,) * 4)
    top = torch.randint(0, 2 * pad + 1, (n,), generator=gen)
    left = torch.randint(0, 2 * pad + 1, (n,), generator=gen)
    flip = torch.randint(0, 2, (n,), generator=gen).bool()
    return _gather(p, top, left, h, w, flip)


def _gather(p, top, left, h, w, flip):
    n, c = p.shape[:2]
    rows = top[:, None] + torch.arange(h)[None, :]                     # (N, H)
    cols = torch.arange(w)[None, :].expand(n, w)
    if flip is not None:
        cols = torch.where(flip[:, None], (w - 1) - cols, cols)
    cols = left[:, None] + cols                                        # (N, W)
    return p[torch.arange(n)[:, None, None, None], torch.arange(c)[None, :, None, None],
             rows[:, None, :, None], cols[:, None, None, :]]


def one_cycle(max_lr, total):
    """mixprec's optim.OneCycle(max_lr, total, 0.25, 25, 1e4): torch's
    OneCycleLR with cosine annealing and without momentum cycling, as a
    function of the 0-based step."""
    start = max_lr / 25
    end = start / 1e4
    up = int(0.25 * total) - 1

    def anneal(a, b, t):
        return b + (a - b) / 2 * (1 + math.cos(math.pi * t))

    def lr(step):
        if step <= up:
            return anneal(start, max_lr, step / max(up, 1))
        down = total - 1 - up
        return anneal(max_lr, end, min((step - up) / max(down, 1), 1))
    return lr


def cosine(base, warmup, total):
    """mixprec's optim.Cosine(base, 0, warmup, total): a linear warm-up from
    0 over warmup steps, then a half cosine down to 0 at total."""
    def lr(step):
        if step < warmup:
            return base * (step + 1) / warmup
        t = min((step - warmup) / max(total - warmup, 1), 1)
        return base * 0.5 * (1 + math.cos(math.pi * t))
    return lr


def set_lr(opt, lr):
    for g in opt.param_groups:
        g["lr"] = lr


def summary(model, amp, threads, steps, samples, train_time, last_loss, acc, epochs, extra=None):
    """The JSON summary of mixprec's examples (the keys bench_peer.py reads),
    plus the framework and its thread settings."""
    s = {"model": model, "device": "cpu", "amp": amp, "framework": f"torch {torch.__version__}",
         "epochs": epochs, "steps": steps, "train_loss": last_loss, "test_accuracy": acc,
         "samples_per_sec": samples / train_time, "ms_per_step": 1000 * train_time / max(steps, 1),
         "wall_seconds": train_time}
    s.update(threads)
    s.update(extra or {})
    return s


def emit(s, as_json):
    print(json.dumps(s) if as_json else s)
