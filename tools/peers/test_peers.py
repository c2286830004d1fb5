"""Tests of the benchmark runner (tools/bench_peer.py) and of what the
PyTorch peers share (common.py): thread settings, interleaving, choosing the
fastest setting and the ratios, and that the peers' augmentations and
schedules are mixprec's; and of the GPT peer (torch_gpt.py): its model,
recipe, batches and validation loss, a short run, and the weights check of
tools/reference/torch_gpt.py.

  /usr/bin/python3 -m unittest discover -s tools/peers -p 'test_*.py'

The augmentation and schedule tests need torch (sh tools/install-peer.sh)
and are skipped, saying so, without it.
"""
import json, math, os, subprocess, sys, tempfile, unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
import bench_peer  # noqa: E402

try:
    import torch
    import common
    import torch_gpt
except ImportError as e:  # the runner's own logic needs no torch
    torch, common, torch_gpt, TORCH_MISSING = None, None, None, str(e)


class TestSettings(unittest.TestCase):
    def test_four_settings_on_two_cores(self):
        got = [(n, t, ob) for n, t, ob in bench_peer.torch_settings(2)]
        want = [("torch 1 thread, OpenBLAS default", 1, None), ("torch 1 thread, OpenBLAS 1 thread", 1, "1"),
                ("torch 2 threads, OpenBLAS default", 2, None), ("torch 2 threads, OpenBLAS 1 thread", 2, "1")]
        self.assertEqual(got, want)

    def test_one_core_has_two(self):
        self.assertEqual([t for _, t, _ in bench_peer.torch_settings(1)], [1, 1])

    def test_env(self):
        base = {"PATH": "/bin", "OMP_NUM_THREADS": "4", "OPENBLAS_NUM_THREADS": "3", "GOTO_NUM_THREADS": "2",
                "OPENBLAS_CORETYPE": "Haswell"}
        for ob, core, want in [(None, None, {"PATH": "/bin"}),
                               ("1", None, {"PATH": "/bin", "OPENBLAS_NUM_THREADS": "1"}),
                               (None, "Cooperlake", {"PATH": "/bin", "OPENBLAS_CORETYPE": "Cooperlake"})]:
            with self.subTest(openblas=ob, coretype=core):
                self.assertEqual(bench_peer.torch_env(base, ob, core), want)
        self.assertEqual(base["OMP_NUM_THREADS"], "4", "torch_env changed its argument")


class TestCoreProbe(unittest.TestCase):
    """probe_openblas_core with subprocess.run faked: each core type reports
    itself and a time."""

    def probe(self, own, secs, flags):
        calls = []

        def fake(cmd, capture_output, text, env, cwd):
            core = env.get("OPENBLAS_CORETYPE") or own
            calls.append(env.get("OPENBLAS_CORETYPE"))
            self.assertEqual(env.get("OPENBLAS_NUM_THREADS"), "1")
            return subprocess.CompletedProcess(cmd, 0, f"{secs[core]}\n", f"Core: {core}\n")
        real = bench_peer.subprocess.run
        bench_peer.subprocess.run = fake
        try:
            return bench_peer.probe_openblas_core({"PATH": "/bin"}, flags, lambda s: None), calls
        finally:
            bench_peer.subprocess.run = real

    def test_generic_pick_replaced(self):
        (core, rep), calls = self.probe("Prescott", {"Prescott": 4.0, "Cooperlake": 1.0, "SkylakeX": 1.2, "Haswell": 2.0},
                                        {"avx2", "avx512f", "avx512_bf16"})
        self.assertEqual(core, "Cooperlake")
        self.assertEqual(calls, [None, "Cooperlake", "SkylakeX", "Haswell"])
        self.assertEqual(rep["own_choice"], "Prescott")

    def test_own_pick_kept_unless_clearly_slower(self):
        (core, rep), calls = self.probe("Cooperlake", {"Cooperlake": 1.0, "SkylakeX": 0.95, "Haswell": 2.0},
                                        {"avx2", "avx512f", "avx512_bf16"})
        self.assertIsNone(core)
        self.assertEqual(calls, [None, "SkylakeX", "Haswell"])

    def test_flags_limit_candidates(self):
        (core, _), calls = self.probe("Prescott", {"Prescott": 2.0, "Haswell": 1.0}, {"avx2"})
        self.assertEqual((core, calls), ("Haswell", [None, "Haswell"]))


class TestInterleave(unittest.TestCase):
    def test_every_job_once_and_ours_spread(self):
        ours, peers = ["o1", "o2", "o3"], [f"p{i}" for i in range(10)]
        for shift in range(4):
            with self.subTest(shift=shift):
                got = bench_peer.interleave(ours, peers, shift)
                self.assertEqual(sorted(got), sorted(ours + peers))
                pos = [i for i, j in enumerate(got) if j.startswith("o")]
                self.assertEqual(pos[0], 0, f"ours should start: {got}")
                gaps = [b - a for a, b in zip(pos, pos[1:])]
                self.assertTrue(all(g >= 3 for g in gaps), f"ours bunched together: {got}")

    def test_rotates(self):
        a = bench_peer.interleave(["o1", "o2"], ["p1", "p2", "p3", "p4"], 0)
        b = bench_peer.interleave(["o1", "o2"], ["p1", "p2", "p3", "p4"], 1)
        self.assertNotEqual(a, b)

    def test_no_ours(self):
        self.assertEqual(bench_peer.interleave([], ["p1", "p2"], 1), ["p2", "p1"])


class TestRows(unittest.TestCase):
    def figures(self):
        f = bench_peer.Figures()
        settings = bench_peer.torch_settings(2)
        # medians: torch fp32 best under setting 1 (100), bf16 best under setting 2 (250).
        rates = {("off", 0): [90, 100, 110], ("off", 1): [80, 85, 300], ("off", 2): [10, 20, 30], ("off", 3): [50, 60, 70],
                 ("bf16", 0): [100, 100, 100], ("bf16", 1): [240, 250, 260], ("bf16", 2): [1, 2, 3], ("bf16", 3): [5, 6, 7]}
        for (mode, i), rs in rates.items():
            for r in rs:
                f.add(("torch", settings[i][0], mode), {"rate": r, "framework": "torch 9.9"})
        for mode, rs in {"off": [120, 150, 130], "f16": [10, 11, 12], "bf16": [500, 400, 300]}.items():
            for r in rs:
                f.add(("mixprec", "", mode), {"rate": r, "ms_per_step": 1000 / r, "test_accuracy": 0.97})
        for r in [5, 6, 7]:
            f.add(("gorgonia", "", "off"), {"rate": r, "framework": "gorgonia v1"})
        return f, settings

    def test_fastest_and_ratios(self):
        f, settings = self.figures()
        w = bench_peer.WORKLOADS["mlp"]
        rows, st = bench_peer.rows_for("mlp", w, f, settings, {"gomlx": "it broke"}, 2)
        by = {(r["framework"], r["amp"]): r for r in rows}
        self.assertEqual(by[("torch 9.9", "off")]["setting"], "torch 1 thread, OpenBLAS default")
        self.assertEqual(by[("torch 9.9", "off")]["median"], 100)
        self.assertEqual(by[("torch 9.9", "bf16")]["setting"], "torch 1 thread, OpenBLAS 1 thread")
        self.assertEqual(by[("torch 9.9", "bf16")]["median"], 250)
        self.assertAlmostEqual(by[("mixprec", "off")]["vs_torch_fp32"], 130 / 100)
        self.assertAlmostEqual(by[("mixprec", "bf16")]["vs_torch_bf16"], 400 / 250)
        self.assertAlmostEqual(by[("gorgonia v1", "off")]["vs_torch_fp32"], 6 / 100)
        self.assertEqual(by[("gomlx", "off")]["unavailable"], "it broke")
        self.assertEqual(sum(s["fastest"] for s in st), 2)
        self.assertEqual(len(st), 8)

    def test_table_prints_unavailable(self):
        import io
        f, settings = self.figures()
        w = bench_peer.WORKLOADS["mlp"]
        rows, st = bench_peer.rows_for("mlp", w, f, settings, {"gomlx": "it broke"}, 2)
        report = {"repeat": 3, "torch": "PyTorch 9.9", "machine": {"cpu": "x", "cores": 2, "load_start": "0", "load_end": "0"},
                  "workloads": {"mlp": {"about": "a", "unit": "samples/s", "timed": "t", "rows": rows, "torch_settings": st}}}
        out = io.StringIO()
        bench_peer.print_tables(report, out)
        self.assertIn("gomlx", out.getvalue())
        self.assertIn("unavailable: it broke", out.getvalue())
        self.assertIn("torch 1 thread, OpenBLAS default", out.getvalue())


class TestGPTWorkload(unittest.TestCase):
    """The gpt workload: its commands, its rate (tokens/s) and quality (the
    validation loss), and what happens when its program or corpus is
    missing."""

    def args(self, data, binary_dir):
        class A:
            pass
        a = A()
        a.data, a.bin, a.openblas_core, a.go_peer_steps = data, binary_dir, None, 0
        return a

    def test_commands(self):
        w = bench_peer.workloads(dict(bench_peer.DEFAULT_STEPS, gpt=17))["gpt"]
        ours, peers = bench_peer.jobs_for("gpt", w, self.args("/d", "/b"), {"PATH": "/bin"}, bench_peer.torch_settings(2))
        self.assertEqual([k for k, _, _, _ in ours], [("mixprec", "", m) for m in ("off", "f16", "bf16")])
        self.assertEqual(ours[0][1], ["/b/gpt", "-corpus", "austen", "-iters", "17", "-data", "/d", "-amp", "off", "-json"])
        self.assertEqual(len(peers), 8)
        cmd = peers[0][1]
        self.assertEqual(os.path.basename(cmd[1]), "torch_gpt.py")
        self.assertEqual(cmd[2:], ["--iters", "17", "--text", "/d/austen/austen.txt", "--amp", "off", "--threads", "1", "--json"])
        (mode, s), = ours[2][3]({"tokens_per_sec": 1234.5, "val_loss": 1.5})
        self.assertEqual((mode, s["rate"], s["val_loss"]), ("bf16", 1234.5, 1.5))

    def test_larger_model(self):
        # gpt6x384 gives both programs the same shape, under each one's
        # flag spelling.
        w = bench_peer.workloads(dict(bench_peer.DEFAULT_STEPS, gpt6x384=5))["gpt6x384"]
        ours, peers = bench_peer.jobs_for("gpt6x384", w, self.args("/d", "/b"), {"PATH": "/bin"}, bench_peer.torch_settings(2))
        shape = ["layers", "6", "heads", "6", "embd", "384", "block", "256", "batch", "8"]
        self.assertEqual(ours[0][1], ["/b/gpt", "-corpus", "austen", "-iters", "5", "-eval-windows", "20"]
                         + [("-" + x if i % 2 == 0 else x) for i, x in enumerate(shape)] + ["-data", "/d", "-amp", "off", "-json"])
        cmd = peers[0][1]
        self.assertEqual(cmd[2:], ["--iters", "5", "--eval-windows", "20"] + [("--" + x if i % 2 == 0 else x) for i, x in enumerate(shape)]
                         + ["--text", "/d/austen/austen.txt", "--amp", "off", "--threads", "1", "--json"])

    def test_table_shows_val_loss(self):
        import io
        w = bench_peer.WORKLOADS["gpt"]
        f = bench_peer.Figures()
        settings = bench_peer.torch_settings(2)
        for r, v in ((100, 1.51), (120, 1.49), (110, 1.50)):
            f.add(("mixprec", "", "off"), {"rate": r, "val_loss": v})
            f.add(("torch", settings[0][0], "off"), {"rate": r / 2, "val_loss": v + 0.01, "framework": "torch 9.9"})
        rows, st = bench_peer.rows_for("gpt", w, f, settings, {}, 2)
        by = {(r["framework"], r["amp"]): r for r in rows}
        self.assertAlmostEqual(by[("mixprec", "off")]["vs_torch_fp32"], 2.0)
        self.assertAlmostEqual(by[("mixprec", "off")]["val_loss"], 1.50)
        report = {"repeat": 3, "torch": "PyTorch 9.9", "machine": {"cpu": "x", "cores": 2, "load_start": "0", "load_end": "0"},
                  "workloads": {"gpt": {"about": "a", "unit": w.unit, "timed": "t", "quality": list(w.quality),
                                        "rows": rows, "torch_settings": st},
                                "cnn": {"about": "b", "unit": "samples/s", "unavailable": "no binary"}}}
        out = io.StringIO()
        bench_peer.print_tables(report, out)
        text = out.getvalue()
        self.assertIn(" val ", text)
        self.assertIn("1.5000", text)
        self.assertIn("1.5100", text)
        self.assertIn("unavailable: no binary", text)

    def test_prepare(self):
        w = bench_peer.WORKLOADS["gpt"]
        with tempfile.TemporaryDirectory() as d:
            data, bins = os.path.join(d, "data"), os.path.join(d, "bin")
            os.makedirs(bins)
            a = self.args(data, bins)
            got = bench_peer.prepare("gpt", w, a, dict(os.environ), lambda s: None)
            self.assertIn("was not built", got or "")
            # A stand-in for our program that fetches the corpus as it does.
            fake = os.path.join(bins, "gpt")
            with open(fake, "w") as f:
                f.write('#!/bin/sh\nmkdir -p "$4/austen" && echo text > "$4/austen/austen.txt" && echo "{}"\n')
            os.chmod(fake, 0o755)
            self.assertIsNone(bench_peer.prepare("gpt", w, a, dict(os.environ), lambda s: None))
            self.assertTrue(os.path.exists(os.path.join(data, "austen", "austen.txt")))
            os.remove(os.path.join(data, "austen", "austen.txt"))
            with open(fake, "w") as f:
                f.write('#!/bin/sh\necho "gpt: no network" >&2; exit 1\n')
            got = bench_peer.prepare("gpt", w, a, dict(os.environ), lambda s: None)
            self.assertIn("no network", got or "")


def shift_ref(img, dy, dx, fill):
    """datasets.RandomShift's shift of one (C, H, W) image, element by element."""
    c, h, w = img.shape
    out = torch.full_like(img, fill)
    for y in range(h):
        for x in range(w):
            sy, sx = y - dy, x - dx
            if 0 <= sy < h and 0 <= sx < w:
                out[:, y, x] = img[:, sy, sx]
    return out


def crop_flip_ref(img, pad, top, left, flip):
    """datasets.RandomCropFlip's cropFlip of one (C, H, W) image."""
    c, h, w = img.shape
    out = torch.zeros_like(img)
    for y in range(h):
        for x in range(w):
            sy, sx = y + top - pad, x + left - pad
            if 0 <= sy < h and 0 <= sx < w:
                out[:, y, x] = img[:, sy, sx]
    return out.flip(-1) if flip else out


@unittest.skipIf(torch is None, "torch is not installed (sh tools/install-peer.sh): " + (TORCH_MISSING if torch is None else ""))
class TestAugment(unittest.TestCase):
    def test_shift(self):
        x = torch.randn(6, 2, 7, 9, generator=torch.Generator().manual_seed(1))
        m, fill = 2, -0.42
        got = common.shift_batch(x, m, fill, torch.Generator().manual_seed(7))
        g = torch.Generator().manual_seed(7)  # the same draws: tops, then lefts
        top = torch.randint(0, 2 * m + 1, (6,), generator=g)
        left = torch.randint(0, 2 * m + 1, (6,), generator=g)
        for i in range(6):
            want = shift_ref(x[i], m - int(top[i]), m - int(left[i]), fill)
            self.assertTrue(torch.equal(got[i], want), f"image {i}: shift ({m - int(top[i])}, {m - int(left[i])})")

    def test_shifts_cover_the_range(self):
        x = torch.arange(25.0).reshape(1, 1, 5, 5).expand(400, 1, 5, 5)
        got = common.shift_batch(x, 2, -1.0, torch.Generator().manual_seed(3))
        kinds = {tuple(got[i].flatten().tolist()) for i in range(400)}
        self.assertEqual(len(kinds), 25, "want every (dy, dx) in [-2, 2]^2")

    def test_crop_flip(self):
        x = torch.randn(8, 3, 6, 6, generator=torch.Generator().manual_seed(2))
        pad = 4
        got = common.crop_flip_batch(x, pad, torch.Generator().manual_seed(9))
        g = torch.Generator().manual_seed(9)
        top = torch.randint(0, 2 * pad + 1, (8,), generator=g)
        left = torch.randint(0, 2 * pad + 1, (8,), generator=g)
        flip = torch.randint(0, 2, (8,), generator=g).bool()
        for i in range(8):
            want = crop_flip_ref(x[i], pad, int(top[i]), int(left[i]), bool(flip[i]))
            self.assertTrue(torch.equal(got[i], want), f"image {i}")


@unittest.skipIf(torch is None, "torch is not installed (sh tools/install-peer.sh)")
class TestSchedules(unittest.TestCase):
    def test_one_cycle_is_torch_one_cycle_without_momentum_cycling(self):
        # mixprec's optim.OneCycle ends the warm-up at the whole step
        # int(0.25 total) - 1 where torch keeps 0.25 total - 1 fractional, so
        # they agree exactly when 0.25 total is whole, as for the CNN's 60.
        for total in (60, 468, 8):
            with self.subTest(total=total):
                p = torch.nn.Parameter(torch.zeros(1))
                opt = torch.optim.AdamW([p], lr=3e-3)
                sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=total, pct_start=0.25,
                                                            div_factor=25, final_div_factor=1e4, cycle_momentum=False)
                ours = common.one_cycle(3e-3, total)
                for step in range(total):
                    want = opt.param_groups[0]["lr"]
                    self.assertTrue(math.isclose(ours(step), want, rel_tol=1e-9, abs_tol=1e-12),
                                    f"step {step}: {ours(step)} want {want}")
                    opt.step()
                    sched.step()

    def test_cosine(self):
        # optim.Cosine(0.1, 0, 3, 23): warm-up (step+1)/3, then a half cosine over 20 steps.
        lr = common.cosine(0.1, 3, 23)
        for step, want in [(0, 0.1 / 3), (2, 0.1), (3, 0.1), (13, 0.05), (22, 0.05 * (1 + math.cos(math.pi * 19 / 20))), (40, 0.0)]:
            self.assertAlmostEqual(lr(step), want, places=12, msg=f"step {step}")


TINY = dict(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=16)


@unittest.skipIf(torch is None, "torch is not installed (sh tools/install-peer.sh)")
class TestGPTModel(unittest.TestCase):
    def test_names_tying_and_count(self):
        for bias in (False, True):
            with self.subTest(bias=bias):
                torch.manual_seed(0)
                m = torch_gpt.GPT(torch_gpt.GPTConfig(bias=bias, **TINY))
                self.assertIs(m.lm_head.weight, m.transformer.wte.weight)
                names = list(m.state_dict())
                want = ["transformer.wte.weight", "transformer.wpe.weight"]
                for i in range(2):
                    for n in ("ln_1", "attn.c_attn", "attn.c_proj", "ln_2", "mlp.c_fc", "mlp.c_proj"):
                        want.append(f"transformer.h.{i}.{n}.weight")
                        if bias:
                            want.append(f"transformer.h.{i}.{n}.bias")
                want += ["transformer.ln_f.weight"] + (["transformer.ln_f.bias"] if bias else []) + ["lm_head.weight"]
                self.assertEqual(names, want)
                # mixprec's TestGPTStateNames count, with biases.
                n = 11 * 16 + 8 * 16 + 2 * (4 * 16 + 16 * 48 + 48 + 16 * 16 + 16 + 16 * 64 + 64 + 64 * 16 + 16) + 2 * 16
                if not bias:
                    n -= 2 * (2 * 16 + 48 + 16 + 64 + 16) + 16
                self.assertEqual(torch_gpt.num_params(m), n)

    def test_init(self):
        torch.manual_seed(3)
        m = torch_gpt.GPT(torch_gpt.GPTConfig(vocab_size=64, block_size=64, n_layer=4, n_head=4, n_embd=128, bias=True))
        for name, p in m.named_parameters():
            with self.subTest(name=name):
                if name.endswith("bias"):
                    self.assertEqual(p.abs().max().item(), 0.0)
                elif ".ln_" in name or "ln_f" in name:
                    self.assertTrue(torch.equal(p, torch.ones_like(p)))
                else:
                    want = 0.02 / math.sqrt(8) if name.endswith("c_proj.weight") else 0.02
                    self.assertLess(abs(p.std().item() / want - 1), 0.1, f"std {p.std().item()} want {want}")

    def test_param_groups(self):
        m = torch_gpt.GPT(torch_gpt.GPTConfig(bias=True, **TINY))
        groups, decay, rest = torch_gpt.param_groups(m, 0.1)
        self.assertEqual([g["weight_decay"] for g in groups], [0.1, 0.0])
        self.assertEqual(decay[:2], ["transformer.wte.weight", "transformer.wpe.weight"])
        self.assertTrue(all(n.endswith(".weight") and ".ln_" not in n for n in decay), decay)
        self.assertTrue(all(n.endswith(".bias") or ".ln_" in n or "ln_f" in n for n in rest), rest)
        self.assertEqual(len(decay) + len(rest), len(list(m.parameters())))
        self.assertNotIn("lm_head.weight", decay + rest)

    def test_lr_schedule(self):
        lr, lo = 1e-3, 1e-4
        for it, want in [(0, lr / 101), (99, lr * 100 / 101), (100, lr), (1050, (lr + lo) / 2),
                         (2000, lo), (2001, lo), (5000, lo)]:
            self.assertAlmostEqual(torch_gpt.lr_at(it, lr, lo, 100, 2000), want, places=15, msg=f"iteration {it}")
        prev = lr
        for it in range(100, 2001):
            got = torch_gpt.lr_at(it, lr, lo, 100, 2000)
            self.assertLessEqual(got, prev, f"iteration {it}: the cosine rises")
            prev = got

    def test_corpus(self):
        text = "ba\r\nc\u00e9a\u00e9" * 5
        with tempfile.NamedTemporaryFile("wb", suffix=".txt", delete=False) as f:
            f.write(text.encode("utf-8"))
        try:
            c = torch_gpt.Corpus(torch_gpt.read_text(f.name))
        finally:
            os.remove(f.name)
        self.assertEqual(c.vocab, ["\n", "\r", "a", "b", "c", "\u00e9"])
        self.assertEqual(len(c.ids), len(text))
        self.assertEqual(len(c.train), int(0.9 * len(text)))
        self.assertEqual("".join(c.vocab[i] for i in c.ids.tolist()), text)
        with self.assertRaises(ValueError):
            torch_gpt.Corpus("")

    def test_batches(self):
        train = torch.arange(100)
        x, y = torch_gpt.get_batch(train, 8, 5, torch.Generator().manual_seed(4))
        off = torch.randint(100 - 8, (5,), generator=torch.Generator().manual_seed(4))
        for i in range(5):
            self.assertEqual(x[i].tolist(), list(range(off[i], off[i] + 8)))
            self.assertEqual(y[i].tolist(), list(range(off[i] + 1, off[i] + 9)))

    def test_val_loss_is_the_window_mean(self):
        torch.manual_seed(5)
        m = torch_gpt.GPT(torch_gpt.GPTConfig(**TINY)).double()
        with torch.no_grad():
            for p in m.parameters():
                p.normal_(0, 0.5)
        val = torch.randint(11, (8 * 40 + 3,), generator=torch.Generator().manual_seed(6))
        for cap, w in ((1000, 40), (7, 7), (40, 40)):
            with self.subTest(cap=cap):
                self.assertEqual(torch_gpt.eval_windows(len(val), 8, cap), w)
                losses = []
                for i in range(w):
                    _, l = m(val[i * 8:(i + 1) * 8][None], val[i * 8 + 1:(i + 1) * 8 + 1][None])
                    losses.append(l.item())
                got = torch_gpt.val_loss(m, val, 8, cap, batch=3)
                self.assertAlmostEqual(got, sum(losses) / w, places=12)
        self.assertEqual(torch_gpt.eval_windows(8 * 2, 8, 10), 1, "the last window needs its next id")
        self.assertTrue(m.training, "val_loss left the model in eval mode")

    def test_policies(self):
        torch.manual_seed(7)
        m = torch_gpt.GPT(torch_gpt.GPTConfig(**TINY))
        with torch.no_grad():
            for p in m.parameters():
                p.normal_(0, 0.4)
        idx = torch.randint(11, (3, 8), generator=torch.Generator().manual_seed(8))
        want, _ = m.double()(idx)
        m.float()
        m.set_policy("mixprec")
        got, _ = m.double()(idx)
        self.assertTrue(torch.allclose(got, want, rtol=1e-12, atol=1e-12), "without autocast the policies differ")
        m.float()
        ref, _ = m(idx)
        for policy in ("torch", "mixprec"):
            m.set_policy(policy)
            with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
                low, _ = m(idx)
            self.assertEqual(low.dtype, torch.bfloat16)
            err = (low.float() - ref).abs().max().item()
            self.assertLess(err, 0.1 * ref.abs().max().item(), f"{policy}: bf16 logits {err} from f32")


@unittest.skipIf(torch is None, "torch is not installed (sh tools/install-peer.sh)")
class TestGPTPeer(unittest.TestCase):
    """The peer as bench-peer runs it, briefly, on a small text."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        words = ["light", "colour", "prism", "ray", "the", "of", "and", "refraction", "glass", "red"]
        g = torch.Generator().manual_seed(9)
        text = " ".join(words[i] for i in torch.randint(len(words), (4000,), generator=g).tolist())
        cls.text = os.path.join(cls.dir.name, "t.txt")
        with open(cls.text, "w") as f:
            f.write(text)
        cls.vocab = len(set(text))

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def peer(self, *args):
        return subprocess.run([sys.executable, os.path.join(HERE, "torch_gpt.py")] + list(args),
                              capture_output=True, text=True)

    def test_short_run(self):
        for amp in ("off", "bf16"):
            with self.subTest(amp=amp):
                p = self.peer("--text", self.text, "--iters", "3", "--eval-windows", "4", "--amp", amp, "--json")
                self.assertEqual(p.returncode, 0, p.stderr)
                s = json.loads(p.stdout.strip().splitlines()[-1])
                self.assertEqual((s["iters"], s["amp"], s["val_windows"], s["threads"]), (3, amp, 4, 1))
                c = torch_gpt.GPTConfig(self.vocab, 64, 4, 4, 128)
                self.assertEqual(s["params"], torch_gpt.num_params(torch_gpt.GPT(c)))
                self.assertGreater(s["tokens_per_sec"], 0)
                # Three small steps from nanoGPT's initialisation leave the loss near log(vocab).
                for k in ("train_loss", "val_loss"):
                    self.assertLess(abs(s[k] - math.log(self.vocab)), 0.3, f"{k} {s[k]}")

    def test_size_flags(self):
        # The model is the one the size flags ask for, and a size the
        # recipe cannot take is refused.
        p = self.peer("--text", self.text, "--iters", "1", "--eval-windows", "1", "--json",
                      "--layers", "1", "--heads", "2", "--embd", "8", "--block", "16", "--batch", "2")
        self.assertEqual(p.returncode, 0, p.stderr)
        s = json.loads(p.stdout.strip().splitlines()[-1])
        c = torch_gpt.GPTConfig(self.vocab, 16, 1, 2, 8)
        self.assertEqual(s["params"], torch_gpt.num_params(torch_gpt.GPT(c)))
        self.assertEqual(s["params"], (self.vocab + 16) * 8 + (2 * 8 + 8 * 24 + 8 * 8 + 8 * 32 + 32 * 8) + 8)
        for bad in (["--layers", "0"], ["--heads", "3"], ["--batch", "-1"]):
            with self.subTest(bad=bad):
                p = self.peer("--text", self.text, "--iters", "1", *bad)
                self.assertNotEqual(p.returncode, 0)
                self.assertNotIn("Traceback", p.stderr)

    def test_same_seed_same_run(self):
        a = self.peer("--text", self.text, "--iters", "2", "--eval-windows", "2", "--json", "--seed", "3")
        b = self.peer("--text", self.text, "--iters", "2", "--eval-windows", "2", "--json", "--seed", "3")
        self.assertEqual(a.returncode, 0, a.stderr)
        sa, sb = json.loads(a.stdout.splitlines()[-1]), json.loads(b.stdout.splitlines()[-1])
        self.assertEqual((sa["train_loss"], sa["val_loss"]), (sb["train_loss"], sb["val_loss"]))

    def test_bad_input(self):
        short = os.path.join(self.dir.name, "short.txt")
        with open(short, "w") as f:
            f.write("abc" * 30)
        bad = os.path.join(self.dir.name, "bad.txt")
        with open(bad, "wb") as f:
            f.write(b"caf\xe9" * 100)
        for name, args, want in [("missing", ["--text", os.path.join(self.dir.name, "none")], "No such file"),
                                 ("short", ["--text", short], "a block of 64 needs"),
                                 ("not UTF-8", ["--text", bad], "utf-8"),
                                 ("iters", ["--text", self.text, "--iters", "-1"], "--iters")]:
            with self.subTest(name):
                p = self.peer(*args)
                self.assertNotEqual(p.returncode, 0)
                self.assertIn(want, p.stderr)
                self.assertNotIn("Traceback", p.stderr)


@unittest.skipIf(torch is None, "torch is not installed (sh tools/install-peer.sh)")
class TestGPTWeightsCheck(unittest.TestCase):
    """tools/reference/torch_gpt.py check: weights in, the validation loss
    out, and one line for a file that does not fit."""

    SCRIPT = os.path.join(os.path.dirname(HERE), "reference", "torch_gpt.py")

    def setUp(self):
        sys.path.insert(0, os.path.join(os.path.dirname(HERE), "reference"))
        import torch_safetensors
        self.st = torch_safetensors
        self.dir = tempfile.TemporaryDirectory()
        text = "".join(chr(97 + (i * 7 + i // 13) % 11) for i in range(3000))
        self.text = os.path.join(self.dir.name, "t.txt")
        with open(self.text, "w") as f:
            f.write(text)
        self.corpus = torch_gpt.Corpus(text)

    def tearDown(self):
        self.dir.cleanup()

    def check(self, *args):
        return subprocess.run([sys.executable, self.SCRIPT, "check"] + list(args), capture_output=True, text=True)

    def test_round_trip(self):
        torch.manual_seed(10)
        c = torch_gpt.GPTConfig(vocab_size=len(self.corpus.vocab), block_size=8, n_layer=2, n_head=2, n_embd=16, bias=True)
        m = torch_gpt.GPT(c)
        with torch.no_grad():
            for p in m.parameters():
                p.normal_(0, 0.3)
        want = torch_gpt.val_loss(m, self.corpus.val, 8, 5)
        w = os.path.join(self.dir.name, "w.safetensors")
        self.st.write(w, {n: p for n, p in m.named_parameters()}, {"heads": "2"})
        p = self.check(w, self.text, "--eval-windows", "5", "--json", "--want", str(want))
        self.assertEqual(p.returncode, 0, p.stderr)
        s = json.loads(p.stdout.splitlines()[-1])
        self.assertAlmostEqual(s["val_loss"], want, places=6)
        self.assertEqual((s["windows"], s["config"]["bias"], s["config"]["n_layer"]), (5, True, 2))
        p = self.check(w, self.text, "--eval-windows", "5", "--want", str(want + 0.01))
        self.assertEqual(p.returncode, 1, "a loss 0.01 away agreed")
        # Four heads see other attention: another loss.
        p = self.check(w, self.text, "--eval-windows", "5", "--heads", "4", "--json")
        self.assertNotAlmostEqual(json.loads(p.stdout.splitlines()[-1])["val_loss"], want, places=4)

    def test_bad_files(self):
        torch.manual_seed(11)
        V = len(self.corpus.vocab)
        m = torch_gpt.GPT(torch_gpt.GPTConfig(vocab_size=V, block_size=8, n_layer=1, n_head=2, n_embd=16))
        good = {n: p for n, p in m.named_parameters()}
        cases = [("vocabulary", dict(good, **{"transformer.wte.weight": torch.zeros(V + 1, 16)}), [], "need [%d, 16]" % V),
                 ("shape", dict(good, **{"transformer.h.0.mlp.c_fc.weight": torch.zeros(60, 16)}), [], "transformer.h.0.mlp.c_fc.weight is [60, 16]"),
                 ("missing", {k: v for k, v in good.items() if "ln_2" not in k}, [], "transformer.h.0.ln_2.weight [16] is missing"),
                 ("untied", dict(good, **{"lm_head.weight": torch.ones(V, 16)}), [], "lm_head.weight differs"),
                 ("heads", good, ["--heads", "0"], "--heads N")]
        for name, tensors, extra, want in cases:
            with self.subTest(name):
                w = os.path.join(self.dir.name, name + ".safetensors")
                self.st.write(w, tensors)
                p = self.check(w, self.text, *(extra or ["--heads", "2"]))
                self.assertNotEqual(p.returncode, 0)
                self.assertIn(want, p.stderr)
                self.assertNotIn("Traceback", p.stderr)
        p = self.check(os.path.join(self.dir.name, "none"), self.text, "--heads", "2")
        self.assertIn("No such file", p.stderr)
        self.assertNotIn("Traceback", p.stderr)


if __name__ == "__main__":
    unittest.main()
