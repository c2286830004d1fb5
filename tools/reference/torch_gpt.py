"""PyTorch reference values for mixprec's character GPT (nn/models.GPT),
computed with the model of tools/peers/torch_gpt.py (nanoGPT's structure and
state_dict names).

  /usr/bin/python3 tools/reference/torch_gpt.py make [DIR]
      writes every fixture below into DIR (default testdata/)
  /usr/bin/python3 tools/reference/torch_gpt.py init [DIR]
      writes only the interop model (torch_gpt_init.*)
  /usr/bin/python3 tools/reference/torch_gpt.py check WEIGHTS TEXT [--heads N]
      [--eval-windows 200] [--want LOSS] [--json]
      loads a mixprec-written nanoGPT-named safetensors file into the PyTorch
      model and prints its deterministic validation loss on TEXT

Conventions. Every file is safetensors, every tensor F32. Token ids and
targets are stored as F32 holding exact integers. Scalars (losses) have
shape []. Weights have nanoGPT's state_dict names; lm_head.weight, being
transformer.wte.weight, is left out of the weight files written for the
tests (torch_gpt_init.safetensors, a PyTorch state_dict as a user would
export it, keeps it). The FP32 values (logits, losses, gradients, the AdamW
trajectory) are computed in float64 from the F32 weights and inputs and
stored rounded to F32: they are the exact values to F32's precision, so
what a float32 implementation differs by is its own rounding. How far
float32 PyTorch is from them is recorded in torch_gpt.json ("measured"):
about 2e-6 absolute on logits of order 1 and 3e-7 on gradients, which near
zero is more than 1e-5 relative, so compare with an absolute term too.

The test model: vocab 11, block 8, n_layer 2, n_head 2, n_embd 16, dropout
0. Its weights are not nanoGPT's initialisation (N(0, 0.02) leaves the
attention uniform and the logits near 0, where a wrong scale, mask or
LayerNorm bias would go unseen) but generic values drawn from a seeded
generator, sized so that every activation is of order 1: wte and wpe
N(0, 0.5), LayerNorm weights 1 + N(0, 0.3) and biases N(0, 0.3), Linear
weights N(0, 1/sqrt(fan_in)), Linear biases N(0, 0.1).

Files:
  torch_gpt_nobias.safetensors, torch_gpt_bias.safetensors
      the test model's weights, bias=False and bias=True: transformer.wte.weight
      (11,16), transformer.wpe.weight (8,16), per block i in 0, 1:
      transformer.h.i.ln_1.weight (16), .attn.c_attn.weight (48,16),
      .attn.c_proj.weight (16,16), .ln_2.weight (16), .mlp.c_fc.weight (64,16),
      .mlp.c_proj.weight (16,64); transformer.ln_f.weight (16); with bias=True
      also every LayerNorm's .bias (16) and every Linear's .bias (48, 16, 64, 16).
      Metadata: the config (vocab_size, block_size, n_layer, n_head, n_embd, bias).
  torch_gpt_nobias_io.safetensors, torch_gpt_bias_io.safetensors
      FP32 forward and backward of that model, dropout 0, on two inputs:
        ids (3,8), targets (3,8), logits (3,8,11), loss [],
        grad.NAME for every weight NAME of the weights file (wte's gradient
        is the sum of its uses as the embedding and as lm_head);
        short.ids (3,5), short.targets (3,5), short.logits (3,5,11),
        short.loss [], short.grad.NAME: the same with T = 5 < block (rows 5-7
        of wpe's gradient are 0).
      BF16 autocast (torch.autocast("cpu", dtype=torch.bfloat16), same
      weights and inputs): bf16.logits (3,8,11), bf16.loss [],
      short.bf16.logits (3,5,11), short.bf16.loss [].
  torch_gpt_adamw_io.safetensors
      10 AdamW steps from torch_gpt_nobias.safetensors: ids (10,3,8) and
      targets (10,3,8), step s's batch; losses (10), step s's loss before
      its update; grad_norms (10), the total gradient norm before clipping
      (every step clips: the norms are above 1); lr [] (constant, 1e-3). Each step: forward, backward,
      clip_grad_norm_(1.0), AdamW.step(): betas (0.9, 0.99), eps 1e-8,
      weight decay 0.1 on the 2-D parameters (wte, wpe, every Linear
      weight) and 0 on the rest (LayerNorm weights, biases).
  torch_gpt_adamw.safetensors
      the weights after the 10 steps (names as torch_gpt_nobias.safetensors).
      The bias=False model is the one trained because with bias=True the key
      part of c_attn.bias (elements C..2C-1) has a gradient that is 0 in exact
      arithmetic (softmax ignores a constant added to a row of scores), so
      its AdamW update, g/(sqrt(v)+eps) of rounding noise, is noise too.
      For the same reason grad.*.attn.c_attn.bias[16:32] of
      torch_gpt_bias_io is about 1e-17 where a float32 computation gets
      about 1e-8: compare those elements with an absolute tolerance.
  torch_gpt_init.safetensors
      the interop model for mixprec to load: PyTorch's state_dict (with
      lm_head.weight equal to transformer.wte.weight) of the GPT vocab 91 (the
      Opticks text's), block 16, n_layer 2, n_head 2, n_embd 32, bias=True,
      initialised by PyTorch with nanoGPT's scheme (torch.manual_seed(1)) and
      then trained 200 AdamW iterations of the recipe (constant lr 1e-3,
      batch 12, clipping 1) on the Opticks text, so that its biases are not 0
      and its logits not flat: a wrongly loaded tensor changes the loss.
      Metadata: the config and "train_iters".
  torch_gpt.json
      "lr_schedule": nanoGPT's learning rate (warmup_iters 100,
      lr_decay_iters = max_iters 2000, lr 1e-3, min_lr 1e-4) at a list of
      iterations, computed in float64;
      "init": torch_gpt_init's config and its deterministic validation loss
      on $(go env GOROOT)/src/testdata/Isaac.Newton-Opticks.txt (its SHA-256
      and character count beside it) with eval_windows 20: val_loss
      computed in float64 from the F32 weights, val_loss_f32 by float32
      PyTorch;
      "bf16_policy" and "measured": see below.

BF16 policy. torch 1.13's CPU autocast runs linear, matmul and bmm in
bfloat16 and cross_entropy in float32, but layer_norm and softmax in their
input's dtype (a bfloat16 input stays bfloat16). mixprec's policy keeps
layer_norm, softmax, log-softmax and cross-entropy in F32 and runs attention
as one fused op in the low dtype. The reference runs under torch.autocast
and makes that policy explicit where torch's differs: the embeddings and
the residual stream stay F32 (the embedding runs in its weight's dtype, the
residual adds promote), so LayerNorm's input is F32 and it runs in F32;
c_attn, c_proj, c_fc and lm_head are autocast's bfloat16 linears (F32
accumulation, output rounded to bfloat16); GELU runs on the bfloat16 c_fc
output; attention computes as flash attention does (and mixprec's fused
kernel): from the bfloat16 q, k and v, the scores q k^T / sqrt(D), e =
exp(scores - row max) and the row sums l in float32, e rounded to bfloat16
for the product with v, the product times 1/l rounded to bfloat16; the
loss is cross_entropy(logits.float()). With these rounding points fixed,
an implementation that follows the policy differs from the reference only
where a float32 sum in another order rounds to the other bfloat16
neighbour. Rounding anywhere else moves the logits of this model by more
than the BF16 tolerance: torch's own autocast attention (bfloat16 scores
and softmax) does, by the amount recorded in torch_gpt.json as
measured.{bias,nobias}.bf16.torch_autocast_vs_policy.
"""
import argparse, copy, hashlib, importlib.util, json, math, os, struct, subprocess, sys
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import torch_safetensors as st  # noqa: E402

# The model and recipe live with the bench peer; loaded by path, because this
# file has the same name.
_spec = importlib.util.spec_from_file_location("gpt_peer", os.path.join(HERE, "..", "peers", "torch_gpt.py"))
gpt = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gpt)

TESTDATA = os.path.join(HERE, "..", "..", "testdata")
TEST_CONFIG = dict(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=16)
INIT_CONFIG = dict(block_size=16, n_layer=2, n_head=2, n_embd=32, bias=True)
INIT_ITERS, INIT_EVAL_WINDOWS = 200, 20
ADAMW_STEPS, ADAMW_LR = 10, 1e-3
LR_SCHEDULE = dict(warmup_iters=100, lr_decay_iters=2000, max_iters=2000, lr=1e-3, min_lr=1e-4,
                   iters=[0, 1, 50, 98, 99, 100, 101, 150, 500, 1000, 1050, 1500, 1998, 1999, 2000, 2001, 2500])
F32_ATOL, F32_RTOL = 1e-5, 1e-4  # docs/design.md §6
BF16_ATOL, BF16_RTOL = 1e-3, 2e-2


def fail(msg):
    raise SystemExit(f"torch_gpt: {msg}")


def weight_names(model):
    """The model's parameter names, wte once (no lm_head)."""
    return [n for n, _ in model.named_parameters()]


def weights(model):
    return {n: p.detach().float() for n, p in model.named_parameters()}


def set_generic_weights(model, gen):
    """Overwrites every parameter with generic F32 values (see the doc)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name in ("transformer.wte.weight", "transformer.wpe.weight"):
                v = torch.randn(p.shape, generator=gen) * 0.5
            elif ".ln_" in name or name.startswith("transformer.ln_f"):
                v = torch.randn(p.shape, generator=gen) * 0.3
                if name.endswith(".weight"):
                    v += 1
            elif name.endswith(".weight"):
                v = torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[1])
            else:
                v = torch.randn(p.shape, generator=gen) * 0.1
            p.copy_(v.float())


def ids_f32(t):
    return t.to(torch.float32)


def forward_backward(model, ids, targets):
    """logits, loss and every parameter's gradient (by name) of one
    forward and backward pass; the model's gradients are cleared."""
    model.zero_grad(set_to_none=True)
    logits, loss = model(ids, targets)
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    return logits.detach(), loss.detach(), grads


def bf16_forward(model32, ids, targets, policy):
    model32.set_policy(policy)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        logits, loss = model32(ids, targets)
    model32.set_policy("torch")
    return logits.float(), loss.float()


class Gap:
    """The largest distance of some values from the stored ones: max_abs;
    max_rel, relative, over the elements whose magnitude is at least 1e-3
    of their tensor's largest; and tol_ratio, the largest |got - want| /
    (atol + rtol |want|) for the tolerance given (docs/design.md's for the
    dtype: within it when at most 1)."""

    def __init__(self, atol, rtol):
        self.atol, self.rtol = atol, rtol
        self.abs, self.rel, self.ratio = 0.0, 0.0, 0.0

    def add(self, got, want):
        got, want = got.double(), want.double()
        d = (got - want).abs()
        self.abs = max(self.abs, d.max().item())
        self.ratio = max(self.ratio, (d / (self.atol + self.rtol * want.abs())).max().item())
        big = want.abs() >= 1e-3 * want.abs().max().clamp(min=1e-30)
        if big.any():
            self.rel = max(self.rel, (d[big] / want.abs()[big]).max().item())

    def report(self):
        return {"max_abs": self.abs, "max_rel": self.rel, "tol_ratio": self.ratio, "tol": [self.atol, self.rtol]}


def make_model_fixtures(out, bias, seed):
    """torch_gpt_{bias,nobias}(.safetensors, _io.safetensors); returns the
    F32 model (for the AdamW fixture) and the measured gaps."""
    tag = "bias" if bias else "nobias"
    cfg = gpt.GPTConfig(dropout=0.0, bias=bias, **TEST_CONFIG)
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    m32 = gpt.GPT(cfg)
    set_generic_weights(m32, gen)
    m64 = copy.deepcopy(m32).double()
    V, blk = cfg.vocab_size, cfg.block_size
    inputs = {"": (torch.randint(V, (3, blk), generator=gen), torch.randint(V, (3, blk), generator=gen)),
              "short.": (torch.randint(V, (3, 5), generator=gen), torch.randint(V, (3, 5), generator=gen))}
    io = {}
    gap = {k: Gap(F32_ATOL, F32_RTOL) for k in ("logits", "loss", "grads")}
    bfgap = {k: Gap(BF16_ATOL, BF16_RTOL) for k in ("vs_fp32", "torch_autocast_vs_policy")}
    for prefix, (ids, targets) in inputs.items():
        logits, loss, grads = forward_backward(m64, ids, targets)
        io[prefix + "ids"], io[prefix + "targets"] = ids_f32(ids), ids_f32(targets)
        io[prefix + "logits"], io[prefix + "loss"] = logits.float(), loss.float()
        for n, g in grads.items():
            io[prefix + "grad." + n] = g.float()
        l32, s32, g32 = forward_backward(m32, ids, targets)
        gap["logits"].add(l32, logits)
        gap["loss"].add(s32, loss)
        for n in grads:
            gap["grads"].add(g32[n], grads[n])
        bl, bs = bf16_forward(m32, ids, targets, "mixprec")
        io[prefix + "bf16.logits"], io[prefix + "bf16.loss"] = bl, bs
        bfgap["vs_fp32"].add(bl, logits)
        tl, _ = bf16_forward(m32, ids, targets, "torch")
        bfgap["torch_autocast_vs_policy"].add(tl, bl)
    meta = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in cfg.as_dict().items()}
    st.write(os.path.join(out, f"torch_gpt_{tag}.safetensors"), weights(m32), {"format": "pt", **meta})
    st.write(os.path.join(out, f"torch_gpt_{tag}_io.safetensors"), io)
    return m32, {"fp32": {k: v.report() for k, v in gap.items()}, "bf16": {k: v.report() for k, v in bfgap.items()}}


def adamw_run(model, batches):
    opt = gpt.make_adamw(model, ADAMW_LR)
    losses, norms = [], []
    for ids, targets in batches:
        opt.zero_grad(set_to_none=True)
        _, loss = model(ids, targets)
        loss.backward()
        norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0).item())
        opt.step()
        losses.append(loss.item())
    return torch.tensor(losses, dtype=torch.float64), torch.tensor(norms, dtype=torch.float64)


def make_adamw_fixtures(out, m32, seed):
    gen = torch.Generator().manual_seed(seed)
    V, blk = TEST_CONFIG["vocab_size"], TEST_CONFIG["block_size"]
    ids = torch.randint(V, (ADAMW_STEPS, 3, blk), generator=gen)
    targets = torch.randint(V, (ADAMW_STEPS, 3, blk), generator=gen)
    batches = list(zip(ids, targets))
    m64 = copy.deepcopy(m32).double()
    losses, norms = adamw_run(m64, batches)
    f32 = copy.deepcopy(m32)
    l32, n32 = adamw_run(f32, batches)
    gaps = {k: Gap(F32_ATOL, F32_RTOL) for k in ("losses", "grad_norms", "weights")}
    gaps["losses"].add(l32, losses)
    gaps["grad_norms"].add(n32, norms)
    w64 = dict(m64.named_parameters())
    for n, p in f32.named_parameters():
        gaps["weights"].add(p.detach(), w64[n].detach())
    st.write(os.path.join(out, "torch_gpt_adamw_io.safetensors"),
             {"ids": ids_f32(ids), "targets": ids_f32(targets), "losses": losses.float(),
              "grad_norms": norms.float(), "lr": torch.tensor(ADAMW_LR)})
    st.write(os.path.join(out, "torch_gpt_adamw.safetensors"), weights(m64),
             {"format": "pt", "steps": str(ADAMW_STEPS), "start": "torch_gpt_nobias.safetensors"})
    return {k: v.report() for k, v in gaps.items()}


def lr_schedule():
    s = LR_SCHEDULE
    return dict(s, lrs=[gpt.lr_at(it, s["lr"], s["min_lr"], s["warmup_iters"], s["lr_decay_iters"]) for it in s["iters"]])


def go_root():
    try:
        return subprocess.run([os.environ.get("GO") or "go", "env", "GOROOT"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as e:
        fail(f"cannot find Go's GOROOT for the Opticks text: {e}")


def make_init(out):
    """torch_gpt_init.safetensors and its entry of torch_gpt.json."""
    path = os.path.join(go_root(), "src", "testdata", "Isaac.Newton-Opticks.txt")
    try:
        raw = open(path, "rb").read()
        corpus = gpt.Corpus(raw.decode("utf-8"), path)
    except (OSError, UnicodeDecodeError) as e:
        fail(f"the Opticks text: {e}")
    cfg = gpt.GPTConfig(vocab_size=len(corpus.vocab), dropout=0.0, **INIT_CONFIG)
    torch.manual_seed(1)
    gen = torch.Generator().manual_seed(1)
    model = gpt.GPT(cfg)
    opt = gpt.make_adamw(model, 1e-3)
    for _ in range(INIT_ITERS):
        x, y = gpt.get_batch(corpus.train, cfg.block_size, 12, gen)
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    meta = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in cfg.as_dict().items()}
    meta.update(format="pt", train_iters=str(INIT_ITERS))
    st.write(os.path.join(out, "torch_gpt_init.safetensors"), model.state_dict(), meta)
    f32 = gpt.val_loss(model, corpus.val, cfg.block_size, INIT_EVAL_WINDOWS)
    f64 = gpt.val_loss(copy.deepcopy(model).double(), corpus.val, cfg.block_size, INIT_EVAL_WINDOWS)
    return {"weights": "torch_gpt_init.safetensors", "corpus": "$(go env GOROOT)/src/testdata/Isaac.Newton-Opticks.txt",
            "corpus_sha256": hashlib.sha256(raw).hexdigest(), "corpus_chars": len(corpus.ids),
            "config": cfg.as_dict(), "train_iters": INIT_ITERS, "eval_windows": INIT_EVAL_WINDOWS,
            "windows": gpt.eval_windows(len(corpus.val), cfg.block_size, INIT_EVAL_WINDOWS),
            "val_loss": f64, "val_loss_f32": f32}


def write_json(out, update):
    path = os.path.join(out, "torch_gpt.json")
    doc = {}
    if os.path.exists(path):
        with open(path) as f:
            doc = json.load(f)
    doc.update(update)
    with open(path + ".tmp", "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(path + ".tmp", path)


def make(out):
    measured = {}
    m32, measured["nobias"] = make_model_fixtures(out, False, 390)
    _, measured["bias"] = make_model_fixtures(out, True, 391)
    measured["adamw"] = make_adamw_fixtures(out, m32, 392)
    write_json(out, {
        "about": "reference values for mixprec's GPT; made by tools/reference/torch_gpt.py (its doc describes every file)",
        "torch": torch.__version__,
        "test_config": TEST_CONFIG,
        "adamw": {"steps": ADAMW_STEPS, "lr": ADAMW_LR, "betas": [0.9, 0.99], "eps": 1e-8, "weight_decay": 0.1,
                  "clip_norm": 1.0, "start": "torch_gpt_nobias.safetensors"},
        "bf16_policy": "mixprec's: embeddings, residual stream, LayerNorm and cross-entropy in F32; linears in BF16 "
                       "(F32 accumulation); attention as flash attention: F32 scores, exp and row sums from BF16 q and k, "
                       "exp(scores - max) rounded to BF16 for the product with v, then scaled by 1/sum and rounded to BF16",
        "lr_schedule": lr_schedule(),
        "measured": {"about": "fp32, adamw: float32 PyTorch against the stored float64-computed values; bf16: the "
                              "stored BF16 logits against the FP32 ones (vs_fp32), and the same model under torch "
                              "1.13's own CPU autocast attention (BF16 scores and softmax) against the stored BF16 "
                              "logits. max_rel is over the elements at least 1e-3 of their tensor's largest; "
                              "tol_ratio is max |got-want|/(atol+rtol|want|), at most 1 when within tol",
                     **measured},
        "init": make_init(out)})


def read_metadata(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n)).get("__metadata__") or {}


def check(argv):
    p = argparse.ArgumentParser(prog="torch_gpt.py check", description="the validation loss of mixprec-written GPT weights in PyTorch")
    p.add_argument("weights")
    p.add_argument("text")
    p.add_argument("--heads", type=int, default=0, help="attention heads (default: the file's metadata, heads or n_head)")
    p.add_argument("--eval-windows", type=int, default=200)
    p.add_argument("--want", type=float, help="mixprec's loss: exit 1 unless PyTorch's agrees within the F32 tolerance")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    try:
        tensors = st.read(a.weights)
        meta = read_metadata(a.weights)
    except (OSError, ValueError, KeyError, struct.error) as e:
        fail(f"{a.weights}: not a safetensors file of F32 tensors ({type(e).__name__}: {e})")
    try:
        corpus = gpt.Corpus(gpt.read_text(a.text), a.text)
    except (OSError, UnicodeDecodeError, ValueError) as e:
        fail(f"{a.text}: {e}")
    # The causal-mask buffers nanoGPT keeps without flash attention are not weights.
    tensors = {k: v for k, v in tensors.items() if not (k.endswith(".attn.bias") and v.dim() == 4)}
    wte, wpe = tensors.get("transformer.wte.weight"), tensors.get("transformer.wpe.weight")
    if wte is None or wpe is None or wte.dim() != 2 or wpe.dim() != 2:
        fail(f"{a.weights}: no 2-D transformer.wte.weight and transformer.wpe.weight: not nanoGPT-named GPT weights")
    head = tensors.pop("lm_head.weight", None)
    if head is not None and not torch.equal(head, wte):
        fail(f"{a.weights}: lm_head.weight differs from transformer.wte.weight; this GPT ties them")
    layers = 1 + max([int(k.split(".")[2]) for k in tensors if k.startswith("transformer.h.")], default=-1)
    heads = a.heads or int(meta.get("heads") or meta.get("n_head") or 0)
    if heads <= 0:
        fail(f"{a.weights}: the file does not say how many attention heads the model has; give --heads N")
    V, C = wte.shape
    try:
        cfg = gpt.GPTConfig(V, wpe.shape[0], layers, heads, C, 0.0, "transformer.ln_f.bias" in tensors)
    except ValueError as e:
        fail(f"{a.weights}: {e}")
    if len(corpus.vocab) != V:
        fail(f"tensor transformer.wte.weight is {list(wte.shape)} in {a.weights}; the {len(corpus.vocab)} characters "
             f"of {a.text} need {[len(corpus.vocab), C]}")
    model = gpt.GPT(cfg)
    want = dict(model.named_parameters())
    for name in sorted(set(want) | set(tensors)):
        if name not in tensors:
            fail(f"{a.weights}: tensor {name} {list(want[name].shape)} is missing (n_layer {layers}, bias {cfg.bias})")
        if name not in want:
            fail(f"{a.weights}: tensor {name} is not a weight of nanoGPT's GPT (n_layer {layers}, bias {cfg.bias})")
        if want[name].shape != tensors[name].shape:
            fail(f"{a.weights}: tensor {name} is {list(tensors[name].shape)}; the model needs {list(want[name].shape)}")
    with torch.no_grad():
        for name, p in want.items():
            p.copy_(tensors[name])
    if gpt.eval_windows(len(corpus.val), cfg.block_size, a.eval_windows) == 0:
        fail(f"{a.text}: its validation split of {len(corpus.val)} characters holds no window of {cfg.block_size}+1")
    f32 = gpt.val_loss(model, corpus.val, cfg.block_size, a.eval_windows)
    f64 = gpt.val_loss(copy.deepcopy(model).double(), corpus.val, cfg.block_size, a.eval_windows)
    w = gpt.eval_windows(len(corpus.val), cfg.block_size, a.eval_windows)
    s = {"val_loss": f32, "val_loss_f64": f64, "windows": w, "config": cfg.as_dict()}
    ok = a.want is None or abs(f32 - a.want) <= F32_ATOL + F32_RTOL * abs(a.want)
    if a.want is not None:
        s.update(want=a.want, agrees=ok)
    if a.json:
        print(json.dumps(s))
    else:
        print(f"val_loss {f32:.6f} (float32 PyTorch; {f64:.6f} in float64) over {w} windows of {cfg.block_size}; "
              f"n_layer {layers}, n_head {heads}, n_embd {C}, vocab {V}, bias {cfg.bias}"
              + ("" if a.want is None else f"; mixprec's {a.want:.6f}: {'agrees' if ok else 'DIFFERS'}"))
    if not ok:
        raise SystemExit(1)


def main():
    torch.set_num_threads(1)
    args = sys.argv[1:]
    if args[:1] == ["make"] and len(args) <= 2:
        make(args[1] if len(args) > 1 else TESTDATA)
    elif args[:1] == ["init"] and len(args) <= 2:
        out = args[1] if len(args) > 1 else TESTDATA
        write_json(out, {"init": make_init(out)})
    elif args[:1] == ["check"]:
        check(args[1:])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
