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


ROUND = {
    "f32": lambda t: t.detach().to(torch.float32).to(torch.float64),
    "f16": lambda t: t.detach().to(torch.float16).to(torch.float64),
    "bf16": lambda t: t.detach().to(torch.bfloat16).to(torch.float64),
}


def layer_case(g, fn, shapes, distinct_input=False):
    """Inputs of the given shapes (the first one `x`), loss = sum(fn(...) * r)
    for a fixed random r, and the gradient of every input.

    The top level holds the float64 result for the F32-rounded inputs; "f16"
    and "bf16" hold it for inputs and r rounded to that type, which is what a
    layer computing in that type sees. A 16-bit implementation must then
    match within its type's tolerance: what is left is its own arithmetic
    (F32 accumulation, one rounding on store), not the inputs' rounding."""
    ins = []
    for i, shp in enumerate(shapes):
        if i == 0 and distinct_input:
            n = 1
            for d in shp:
                n *= d
            t = (torch.randperm(n, generator=g).to(torch.float64) * 0.01 - 0.3).reshape(shp)
        else:
            t = torch.randn(*shp, generator=g)
        ins.append(f32(t))
    out_shape = fn(*ins).shape
    r = f32(torch.randn(*out_shape, generator=g))

    def run(rnd):
        xs = [rnd(t).requires_grad_(True) for t in ins]
        out = fn(*xs)
        (out * rnd(r)).sum().backward()
        return {"out": enc(out), "grads": [enc(t.grad) for t in xs]}

    case = {"inputs": [enc(t) for t in ins], "r": enc(r)}
    case.update(run(ROUND["f32"]))
    for name in ("f16", "bf16"):
        case[name] = run(ROUND[name])
    return case


def batchnorm_case(g):
    x = f32(torch.randn(4, 3, 5, 5, generator=g) * 2 + 0.5)
    weight = f32(torch.rand(3, generator=g) + 0.5)
    bias = f32(torch.randn(3, generator=g))
    rm0 = f32(torch.randn(3, generator=g) * 0.1)
    rv0 = f32(torch.rand(3, generator=g) + 0.5)
    r = f32(torch.randn(4, 3, 5, 5, generator=g))
    xe = f32(torch.randn(2, 3, 5, 5, generator=g))

    def run(rnd):
        """BatchNorm with its input (and the incoming gradient) rounded by
        rnd; parameters and statistics stay F32, as mixprec keeps them."""
        bn = nn.BatchNorm2d(3, momentum=0.1, eps=1e-5)
        with torch.no_grad():
            bn.weight.copy_(weight)
            bn.bias.copy_(bias)
            bn.running_mean.copy_(rm0)
            bn.running_var.copy_(rv0)
        xi = rnd(x).requires_grad_(True)
        out = bn(xi)
        (out * rnd(r)).sum().backward()
        bn.eval()
        return {"out": enc(out), "dx": enc(xi.grad), "dweight": enc(bn.weight.grad), "dbias": enc(bn.bias.grad),
                "running_mean": enc(bn.running_mean), "running_var": enc(bn.running_var),
                "eval_out": enc(bn(rnd(xe)))}

    case = {"x": enc(x), "weight": enc(weight), "bias": enc(bias), "r": enc(r), "eval_x": enc(xe),
            "before": {"running_mean": enc(rm0), "running_var": enc(rv0)}}
    case.update(run(ROUND["f32"]))
    for name in ("f16", "bf16"):
        case[name] = run(ROUND[name])
    return case


def main():
    g = torch.Generator().manual_seed(20261130)
    ref = {"torch_version": torch.__version__, "mlp": mlp_case(g), "optim": optim_case(g)}
    ref["layers"] = {
        "conv2d_s1p1": layer_case(g, lambda x, w, b: F.conv2d(x, w, b, stride=1, padding=1), [(4, 3, 8, 8), (5, 3, 3, 3), (5,)]),
        "conv2d_s2p0": layer_case(g, lambda x, w: F.conv2d(x, w, None, stride=2, padding=0), [(3, 4, 9, 7), (6, 4, 3, 3)]),
        "conv2d_1x1_s2": layer_case(g, lambda x, w, b: F.conv2d(x, w, b, stride=2), [(2, 8, 6, 6), (4, 8, 1, 1), (4,)]),
        "maxpool_2": layer_case(g, lambda x: F.max_pool2d(x, 2, 2), [(2, 3, 6, 8)], distinct_input=True),
        "maxpool_3s2p1": layer_case(g, lambda x: F.max_pool2d(x, 3, 2, 1), [(2, 2, 7, 7)], distinct_input=True),
        "avgpool_3s2p1": layer_case(g, lambda x: F.avg_pool2d(x, 3, 2, 1), [(2, 2, 7, 6)]),
        "global_avgpool": layer_case(g, lambda x: F.adaptive_avg_pool2d(x, 1).flatten(1), [(3, 4, 5, 5)]),
        "gelu": layer_case(g, lambda x: F.gelu(x), [(5, 7)]),
    }
    ref["batchnorm"] = batchnorm_case(g)
    os.makedirs(os.path.dirname(os.path.abspath(OUT)), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(ref, f, separators=(",", ":"))
        f.write("\n")
    print("wrote", os.path.relpath(OUT))


if __name__ == "__main__":
    main()
