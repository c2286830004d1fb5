"""PyTorch's side of the safetensors interop tests.

  /usr/bin/python3 tools/reference/torch_safetensors.py make [DIR]
      trains the MNIST MLP (784-256-128-10) and CNN for a few SGD steps on
      random data, and writes into DIR (default testdata/) for each model
      torch_MODEL.safetensors (the state_dict) and torch_MODEL_io.safetensors
      (an input batch and the logits PyTorch computes for it, in eval mode).
  /usr/bin/python3 tools/reference/torch_safetensors.py check MODEL WEIGHTS IO
      loads WEIGHTS (written by mixprec) into the same PyTorch model with
      load_state_dict(strict=True), runs IO's "input" and compares with IO's
      "logits"; prints the largest difference and exits 1 if it is over the
      F32 tolerance (|got-want| <= 1e-5 + 1e-4*|want|).

The torch here (Debian's 1.13) has no safetensors package, so the format is
written and read from its definition: an 8-byte little-endian header length,
a JSON header, the tensors' bytes.
"""
import json, struct, sys, os
import numpy as np
import torch
from torch import nn

DTYPES = {"F32": (np.float32, torch.float32), "F64": (np.float64, torch.float64)}


def write(path, tensors, metadata=None):
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, t in tensors.items():
        a = t.detach().to(torch.float32).contiguous().numpy().astype("<f4")
        b = a.tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    js = json.dumps(header, separators=(",", ":")).encode()
    js += b" " * ((8 - len(js) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(js)))
        f.write(js)
        for b in blobs:
            f.write(b)


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    payload = data[8 + n:]
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        npt, _ = DTYPES[e["dtype"]]
        lo, hi = e["data_offsets"]
        a = np.frombuffer(payload[lo:hi], dtype=np.dtype(npt).newbyteorder("<")).reshape(e["shape"])
        out[name] = torch.from_numpy(a.astype(np.float32).copy())
    return out


def model(name):
    if name == "mlp":
        return nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10)), (784,)
    if name == "cnn":
        return nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Dropout(0.25), nn.Flatten(), nn.Linear(9216, 128), nn.ReLU(), nn.Dropout(0.5),
                             nn.Linear(128, 10)), (1, 28, 28)
    raise SystemExit(f"unknown model {name}")


def make(out):
    torch.manual_seed(0)
    for name in ("mlp", "cnn"):
        m, shape = model(name)
        opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
        for _ in range(5):  # a few steps, so that the weights are PyTorch's own and not an initialisation
            x, y = torch.randn(16, *shape), torch.randint(0, 10, (16,))
            opt.zero_grad()
            nn.functional.cross_entropy(m(x), y).backward()
            opt.step()
        m.eval()
        x = torch.randn(4, *shape)
        with torch.no_grad():
            logits = m(x)
        write(os.path.join(out, f"torch_{name}.safetensors"), m.state_dict(), {"format": "pt", "model": name})
        write(os.path.join(out, f"torch_{name}_io.safetensors"), {"input": x, "logits": logits})


def check(name, weights, io):
    m, _ = model(name)
    m.load_state_dict(read(weights), strict=True)
    m.eval()
    t = read(io)
    with torch.no_grad():
        got = m(t["input"])
    want = t["logits"]
    err = (got - want).abs()
    bound = 1e-5 + 1e-4 * want.abs()
    print(f"{name}: max |torch - mixprec| = {err.max().item():.3g}")
    if (err > bound).any():
        raise SystemExit(f"{name}: PyTorch's logits differ from mixprec's beyond the F32 tolerance")


if __name__ == "__main__":
    torch.set_num_threads(1)
    if len(sys.argv) >= 2 and sys.argv[1] == "make":
        make(sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "..", "..", "testdata"))
    elif len(sys.argv) == 5 and sys.argv[1] == "check":
        check(*sys.argv[2:])
    else:
        raise SystemExit(__doc__)
