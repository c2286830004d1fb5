"""PyTorch peer: mixprec's examples/gpt, nanoGPT's character-level GPT
trained with nanoGPT's CPU recipe.

The model has nanoGPT's structure and state_dict names (written here from
its description): token and position embeddings (transformer.wte,
transformer.wpe) summed and dropped out; n_layer pre-norm blocks
transformer.h.{i} of x + attn(ln_1(x)) and x + mlp(ln_2(x)); causal
self-attention from one C -> 3C Linear (attn.c_attn; q, k and v are its
output's three C-wide chunks, heads split as view(B, T, H, D).transpose(1,
2)), q @ k^T / sqrt(D), the future masked with -inf, softmax, dropout, @ v,
then attn.c_proj and dropout; an MLP of mlp.c_fc (C -> 4C), exact (erf)
GELU, mlp.c_proj (4C -> C) and dropout; transformer.ln_f; lm_head (C -> V,
no bias), the same Parameter as transformer.wte.weight. LayerNorm eps 1e-5;
bias=False drops the biases of every Linear and LayerNorm. Initialisation:
every Linear and Embedding weight N(0, 0.02), every *.c_proj.weight
N(0, 0.02/sqrt(2 n_layer)), biases 0, LayerNorm weights 1. Loss:
cross_entropy(logits.view(-1, V), targets.view(-1)). Attention is written out
(torch 1.13 has no scaled_dot_product_attention), as nanoGPT's own
non-flash path does.

The recipe (nanoGPT's shakespeare_char on a CPU, mixprec's examples/gpt
defaults): n_layer 4, n_head 4, n_embd 128, block 64, batch 12, dropout 0,
bias False; AdamW betas (0.9, 0.99), eps 1e-8, weight decay 0.1 on the
parameters of two or more dimensions and 0 on the rest; lr 1e-3 with 100
linear warm-up iterations, lr (it+1)/(warmup+1), then a half cosine down to
lr/10 at the last iteration; gradients clipped to norm 1 before each step;
each batch 12 windows of block+1 ids at offsets
torch.randint(len(train) - block, (batch,)) of the training split, from a
generator seeded with --seed (which also seeds the initialisation). The
corpus is a UTF-8 text: the vocabulary is its sorted distinct characters,
train its first int(0.9 n) ids and val the rest.

  /usr/bin/python3 torch_gpt.py [--text FILE] [--iters 2000] [--amp off|bf16]
      [--seed 1] [--threads T] [--eval-windows 200] [--json]
      [--layers 4] [--heads 4] [--embd 128] [--block 64] [--batch 12]

--text defaults to $MIXPREC_DATA/austen/austen.txt (what mixprec's
datasets.LoadText("austen") caches). --amp bf16 runs forward and loss under
torch.autocast("cpu", dtype=torch.bfloat16), as nanoGPT does. --threads
sets torch's threads; OpenBLAS's follow OPENBLAS_NUM_THREADS. The timed part
is the training iterations alone (learning rate, batch sampling, forward,
loss, backward, clipping, update, reading the loss), as in examples/gpt.
After training, the validation loss is the deterministic one of
examples/gpt: the mean cross-entropy over the first W non-overlapping
windows of the validation split (window i: x = val[i*block:(i+1)*block],
y = the same shifted by one; W = min(--eval-windows, (len(val)-1)//block)),
dropout off, under the run's autocast. With --json the last line is one
JSON object: tokens_per_sec, val_loss, train_loss (the last iteration's),
iters, params (every parameter once: wte is lm_head), train_seconds (the
timed part), wall_seconds (the whole run), and the recipe and thread
settings.

This file is also a module: tools/reference/torch_gpt.py builds its
fixtures from the same model, and test_peers.py tests the pieces.
"""
import argparse, contextlib, json, math, os, sys, time
import torch
import torch.nn as nn
import torch.nn.functional as F
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common

LN_EPS = 1e-5


class GPTConfig:
    """A GPT's shape, in nanoGPT's terms."""

    def __init__(self, vocab_size, block_size, n_layer, n_head, n_embd, dropout=0.0, bias=False):
        if n_embd % n_head:
            raise ValueError(f"{n_head} heads do not divide an embedding width of {n_embd}")
        self.vocab_size, self.block_size = vocab_size, block_size
        self.n_layer, self.n_head, self.n_embd = n_layer, n_head, n_embd
        self.dropout, self.bias = dropout, bias

    def as_dict(self):
        return dict(vars(self))


def wide(t):
    """t in float32 when it is a 16-bit tensor, else t (float64 stays)."""
    return t.float() if t.dtype in (torch.bfloat16, torch.float16) else t


class LayerNorm(nn.Module):
    """LayerNorm over the last axis with an optional bias, in float32 (or
    float64) whatever its input: torch 1.13's CPU autocast would run it in a
    16-bit input's dtype, mixprec's keeps it in F32. (In this model its
    input is always the F32 residual stream, so the two agree.)"""

    def __init__(self, n, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.bias = nn.Parameter(torch.zeros(n)) if bias else None

    def forward(self, x):
        return F.layer_norm(wide(x), self.weight.shape, self.weight, self.bias, LN_EPS)


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention.

    policy "torch" is nanoGPT's explicit attention as torch runs it: under
    CPU autocast the scores q @ k^T come out in the low dtype and softmax
    runs in it too. policy "mixprec" is mixprec's autocast policy for its
    fused attention, which computes as flash attention does: q, k and v in
    the low dtype; the scores q k^T / sqrt(D) in float32; e = exp(scores -
    the row's max) and its row sum l in float32; e rounded to the low dtype
    for the product with v (float32 accumulation); that product times 1/l,
    rounded to the low dtype. Without autocast the two are the same
    softmax attention."""

    def __init__(self, c):
        super().__init__()
        self.n_head = c.n_head
        self.c_attn = nn.Linear(c.n_embd, 3 * c.n_embd, bias=c.bias)
        self.c_proj = nn.Linear(c.n_embd, c.n_embd, bias=c.bias)
        self.attn_dropout = nn.Dropout(c.dropout)
        self.resid_dropout = nn.Dropout(c.dropout)
        # Not persistent: the state_dict holds parameters only, as
        # mixprec's weight files do.
        self.register_buffer("mask", torch.ones(c.block_size, c.block_size, dtype=torch.bool).triu(1), persistent=False)
        self.policy = "torch"

    def forward(self, x):
        B, T, C = x.shape
        H = self.n_head
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))  # (B, H, T, D)
        scale = 1.0 / math.sqrt(C // H)
        mask = self.mask[:T, :T]
        if self.policy == "mixprec" and torch.is_autocast_cpu_enabled():
            low = torch.get_autocast_cpu_dtype()
            with torch.autocast("cpu", enabled=False):
                att = ((q.float() @ k.float().transpose(-2, -1)) * scale).masked_fill(mask, float("-inf"))
                e = (att - att.amax(dim=-1, keepdim=True)).exp()
                denom = e.sum(dim=-1, keepdim=True)
                e = self.attn_dropout(e)
                y = ((e.to(low).float() @ v.float()) * (1 / denom)).to(low)
        else:
            att = (q @ k.transpose(-2, -1)) * scale
            att = self.attn_dropout(F.softmax(att.masked_fill(mask, float("-inf")), dim=-1))
            y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_fc = nn.Linear(c.n_embd, 4 * c.n_embd, bias=c.bias)
        self.c_proj = nn.Linear(4 * c.n_embd, c.n_embd, bias=c.bias)
        self.dropout = nn.Dropout(c.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(F.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.ln_1 = LayerNorm(c.n_embd, c.bias)
        self.attn = CausalSelfAttention(c)
        self.ln_2 = LayerNorm(c.n_embd, c.bias)
        self.mlp = MLP(c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """nanoGPT's GPT; see the module's doc. forward(idx (B, T), targets)
    returns (logits (B, T, V), loss or None)."""

    def __init__(self, c):
        super().__init__()
        self.config = c
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(c.vocab_size, c.n_embd),
            wpe=nn.Embedding(c.block_size, c.n_embd),
            drop=nn.Dropout(c.dropout),
            h=nn.ModuleList([Block(c) for _ in range(c.n_layer)]),
            ln_f=LayerNorm(c.n_embd, c.bias)))
        self.lm_head = nn.Linear(c.n_embd, c.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # tied: one Parameter
        self.init_weights()

    def init_weights(self):
        """nanoGPT's initialisation, drawn from torch's global generator."""
        with torch.no_grad():
            for m in self.modules():
                if isinstance(m, (nn.Linear, nn.Embedding)):
                    m.weight.normal_(0.0, 0.02)
                if isinstance(m, nn.Linear) and m.bias is not None:
                    m.bias.zero_()
            for name, p in self.named_parameters():
                if name.endswith("c_proj.weight"):
                    p.normal_(0.0, 0.02 / math.sqrt(2 * self.config.n_layer))

    def set_policy(self, policy):
        """Sets every attention layer's autocast policy ("torch" or "mixprec")."""
        for b in self.transformer.h:
            b.attn.policy = policy

    def forward(self, idx, targets=None):
        B, T = idx.shape
        if T > self.config.block_size:
            raise ValueError(f"a sequence of {T} is longer than the block of {self.config.block_size}")
        pos = torch.arange(T, device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for b in self.transformer.h:
            x = b(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(wide(logits).view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


def num_params(model):
    """Every parameter once (the tied wte / lm_head counted once), as
    mixprec's nn.CountParams."""
    return sum(p.numel() for p in model.parameters())


def param_groups(model, weight_decay):
    """nanoGPT's AdamW groups: weight decay on the parameters of two or more
    dimensions (Linear weights, embeddings), none on the rest (biases,
    LayerNorm weights). Returns the groups and the two lists of names."""
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    decay = [(n, p) for n, p in named if p.dim() >= 2]
    rest = [(n, p) for n, p in named if p.dim() < 2]
    groups = [{"params": [p for _, p in decay], "weight_decay": weight_decay},
              {"params": [p for _, p in rest], "weight_decay": 0.0}]
    return groups, [n for n, _ in decay], [n for n, _ in rest]


def make_adamw(model, lr, weight_decay=0.1):
    groups, _, _ = param_groups(model, weight_decay)
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.99), eps=1e-8)


def lr_at(it, lr, min_lr, warmup, decay_iters):
    """nanoGPT's learning rate at iteration it (0-based): linear warm-up
    lr (it+1)/(warmup+1) for it < warmup, then a half cosine from lr down to
    min_lr at decay_iters, and min_lr after it."""
    if it < warmup:
        return lr * (it + 1) / (warmup + 1)
    if it > decay_iters:
        return min_lr
    ratio = (it - warmup) / max(decay_iters - warmup, 1)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - min_lr)


class Corpus:
    """A character-level corpus as nanoGPT's shakespeare_char prepares it."""

    def __init__(self, text, name=""):
        if not text:
            raise ValueError(f"corpus {name} is empty")
        self.name = name
        self.vocab = sorted(set(text))
        index = {ch: i for i, ch in enumerate(self.vocab)}
        self.ids = torch.tensor([index[ch] for ch in text], dtype=torch.long)
        n = len(text)
        split = int(0.9 * n)
        self.train, self.val = self.ids[:split], self.ids[split:]


def read_text(path):
    """The UTF-8 text of path, newlines untranslated (as mixprec reads it).
    Errors are OSError or UnicodeDecodeError."""
    with open(path, "rb") as f:
        return f.read().decode("utf-8")


def get_batch(train, block, batch, gen):
    """batch windows of block+1 ids at offsets
    torch.randint(len(train) - block, (batch,)): x the first block ids of
    each, y the last block."""
    ix = torch.randint(len(train) - block, (batch,), generator=gen)
    x = torch.stack([train[i:i + block] for i in ix.tolist()])
    y = torch.stack([train[i + 1:i + 1 + block] for i in ix.tolist()])
    return x, y


def eval_windows(n_val, block, max_windows):
    """How many non-overlapping windows of block ids, each with its next id
    as the last target, fit in n_val ids, capped at max_windows."""
    return max(0, min(max_windows, (n_val - 1) // block))


@torch.no_grad()
def val_loss(model, val, block, max_windows, ctx=contextlib.nullcontext, batch=32):
    """The deterministic validation loss (see the module's doc), summed in
    float64; the model's training mode is restored."""
    w = eval_windows(len(val), block, max_windows)
    if w == 0:
        raise ValueError(f"a validation split of {len(val)} ids holds no window of {block}+1")
    was = model.training
    model.eval()
    total = 0.0
    for i0 in range(0, w, batch):
        n = min(batch, w - i0)
        x = val[i0 * block:(i0 + n) * block].view(n, block)
        y = val[i0 * block + 1:(i0 + n) * block + 1].view(n, block)
        with ctx():
            logits, _ = model(x)
        total += F.cross_entropy(wide(logits).reshape(n * block, -1), y.reshape(-1), reduction="sum").item()
    model.train(was)
    return total / (w * block)


def autocast(amp):
    """The context forward and loss run in for --amp."""
    if amp == "bf16":
        return lambda: torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext


def default_text():
    data = os.environ.get("MIXPREC_DATA") or "data"
    return os.path.join(data, "austen", "austen.txt")


def main(argv=None):
    start = time.perf_counter()
    p = argparse.ArgumentParser(description="PyTorch peer of mixprec's examples/gpt (nanoGPT's character GPT and CPU recipe)")
    p.add_argument("--text", default=default_text(), help="a UTF-8 text file (default $MIXPREC_DATA/austen/austen.txt)")
    p.add_argument("--iters", type=int, default=2000)
    p.add_argument("--amp", choices=["off", "bf16"], default="off")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--eval-windows", type=int, default=200)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--embd", type=int, default=128)
    p.add_argument("--block", type=int, default=64)
    p.add_argument("--batch", type=int, default=12)
    p.add_argument("--log-every", type=int, default=100, help="iterations between progress lines (without --json)")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    if a.iters < 0 or min(a.threads, a.eval_windows, a.layers, a.heads, a.embd, a.block, a.batch) < 1:
        p.error("--iters must be >= 0; --threads, --eval-windows, --layers, --heads, --embd, --block and --batch >= 1")
    if a.embd % a.heads:
        p.error(f"--heads {a.heads} does not divide --embd {a.embd}")
    layers, heads, embd, block, batch, lr, warmup = a.layers, a.heads, a.embd, a.block, a.batch, 1e-3, 100
    try:
        corpus = Corpus(read_text(a.text), a.text)
    except (OSError, UnicodeDecodeError, ValueError) as e:
        sys.exit(f"torch_gpt: corpus {a.text}: {e}")
    if len(corpus.train) < block + 1 or len(corpus.val) < block + 1:
        sys.exit(f"torch_gpt: corpus {a.text} splits into {len(corpus.train)} training and {len(corpus.val)} "
                 f"validation characters; a block of {block} needs {block + 1} in each")
    threads = common.setup_threads(a.threads)
    torch.manual_seed(a.seed)
    gen = torch.Generator().manual_seed(a.seed)
    cfg = GPTConfig(len(corpus.vocab), block, layers, heads, embd, dropout=0.0, bias=False)
    model = GPT(cfg)
    opt = make_adamw(model, lr)
    ctx = autocast(a.amp)
    say = (lambda s: None) if a.json else print
    say(f"corpus {a.text}: {len(corpus.ids)} characters, vocabulary {len(corpus.vocab)}; "
        f"{num_params(model)} parameters; amp {a.amp}, {a.threads} torch threads")
    train_time, last = 0.0, float("nan")
    for it in range(a.iters):
        t = time.perf_counter()
        common.set_lr(opt, lr_at(it, lr, lr / 10, warmup, a.iters))
        x, y = get_batch(corpus.train, block, batch, gen)
        with ctx():
            _, loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        last = loss.item()
        train_time += time.perf_counter() - t
        if a.log_every and (it + 1) % a.log_every == 0:
            say(f"iter {it + 1}: loss {last:.4f}, {(it + 1) * batch * block / train_time:.0f} tokens/s")
    vl = val_loss(model, corpus.val, block, a.eval_windows, ctx)
    tokens = a.iters * batch * block
    s = {"model": "gpt", "corpus": a.text, "device": "cpu", "amp": a.amp, "framework": f"torch {torch.__version__}",
         "iters": a.iters, "params": num_params(model), "train_loss": last, "val_loss": vl,
         "tokens_per_sec": tokens / train_time if train_time > 0 else None,
         "ms_per_step": 1000 * train_time / a.iters if a.iters else None,
         "train_seconds": train_time, "wall_seconds": time.perf_counter() - start,
         "seed": a.seed, "batch": batch, "block": block, "lr": lr, "eval_windows": a.eval_windows,
         "val_windows": eval_windows(len(corpus.val), block, a.eval_windows)}
    s.update(threads)
    if a.json:
        print(json.dumps(s))
    else:
        print(f"val loss {vl:.4f} over {s['val_windows']} windows; train loss {last:.4f}; "
              f"{s['tokens_per_sec'] or 0:.0f} tokens/s over {a.iters} iterations")


if __name__ == "__main__":
    main()
