"""Compute reference values with PyTorch for mixprec's tests.

  /usr/bin/python3 tools/reference/torch_reference.py [OUT]   (default testdata/torch_reference.json)

Every case fixes its inputs and parameters from a seeded generator, runs them
through PyTorch in float64 (the values the Go tests compare against with the
F32 tolerance) and stores inputs, parameters, outputs and gradients. The file
is committed; CI does not need PyTorch. Regenerate with `make reference`.
"""
import json, os, sys
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..", "testdata", "torch_reference.json")


def f32(t):
    """A tensor rounded to float32 values (held as float64), as mixprec stores it."""
    return t.detach().to(torch.float32).to(torch.float64)


def enc(t):
    t = t.detach().to(torch.float64)
    return {"shape": list(t.shape), "data": [float(v) for v in t.reshape(-1).tolist()]}


def named(module):
    return {k: enc(v) for k, v in module.state_dict().items()}


def grads(module):
    return {k: enc(p.grad) for k, p in module.named_parameters()}


def round_params(module):
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(f32(p))


def mlp_case(g):
    model = nn.Sequential(nn.Linear(20, 16), nn.ReLU(), nn.Linear(16, 12), nn.ReLU(), nn.Linear(12, 5))
    round_params(model)
    x = f32(torch.randn(8, 20, generator=g))
    y = torch.randint(0, 5, (8,), generator=g)
    logits = model(x)
    loss = F.cross_entropy(logits, y)
    loss.backward()
    return {"params": named(model), "x": enc(x), "labels": y.tolist(), "logits": enc(logits),
            "loss": float(loss), "grads": grads(model)}


def optim_case(g):
    p0 = f32(torch.randn(10, generator=g))
    gs = [f32(torch.randn(10, generator=g)) for _ in range(6)]
    configs = {
        "sgd": lambda p: torch.optim.SGD([p], lr=0.1),
        "sgd_momentum": lambda p: torch.optim.SGD([p], lr=0.1, momentum=0.9),
        "sgd_dampening_wd": lambda p: torch.optim.SGD([p], lr=0.05, momentum=0.8, dampening=0.3, weight_decay=0.01),
        "sgd_nesterov_wd": lambda p: torch.optim.SGD([p], lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.05),
        "adam": lambda p: torch.optim.Adam([p], lr=0.01),
        "adam_wd": lambda p: torch.optim.Adam([p], lr=0.02, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1),
        "adamw": lambda p: torch.optim.AdamW([p], lr=0.01, weight_decay=0.1),
    }
    out = {"p0": enc(p0), "grads": [enc(x) for x in gs], "trajectories": {}}
    for name, make in configs.items():
        p = p0.clone().requires_grad_(True)
        opt = make(p)
        traj = []
        for gr in gs:
            p.grad = gr.clone()
            opt.step()
            traj.append(enc(p))
        out["trajectories"][name] = traj
    return out


def main():
    g = torch.Generator().manual_seed(20261130)
    ref = {"torch_version": torch.__version__, "mlp": mlp_case(g), "optim": optim_case(g)}
    os.makedirs(os.path.dirname(os.path.abspath(OUT)), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(ref, f, separators=(",", ":"))
        f.write("\n")
    print("wrote", os.path.relpath(OUT))


if __name__ == "__main__":
    main()
