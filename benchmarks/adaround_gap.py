"""Where the AdaRound gap to AIMET came from (issue 13): the Fashion-MNIST SmallResNet, W4 per-channel weight-only,
fasterquant's AdaRound against Qualcomm AIMET 2.42's, on the same model, the same calibration images per seed and the same
500-iteration budget (batch 32), as in `benchmarks/adaround.py`.

1. Evaluation: both sides' learned integers scored on the same test images (all 10,000, and the first 1,000 that the AIMET
   worker of `benchmarks/adaround.py` used to score AIMET on), with one scorer (`accuracy_of`) and, for AIMET's weights and ours,
   inside AIMET's own `QuantizationSimModel` with the integer encodings loaded (activation quantizers off, as in AdaRound).
2. Per layer (seed 0): the grid (per-channel scale, ours over AIMET's `tf_enhanced`), the fraction of weights outside the grid
   (clipped), the fraction rounded differently from nearest, and the reconstruction error of the layer's output (after its
   BatchNorm, as the network computes it) on the same inputs: the float network's activations on the calibration images.
3. One ingredient at a time (ours with AIMET's learning rate, without BatchNorm folding, on AIMET's grid).

Setup (once):  bash benchmarks/setup_aimet.sh        # bench_env/ with AIMET 2.42
Run:           OMP_NUM_THREADS=1 nice python benchmarks/adaround_gap.py [--seeds 3] [--swap-seeds 3]   # about 17 min on 2 shared cores (AIMET runs cached in --work)
Writes benchmarks/results/adaround_gap.md and benchmarks/results/adaround_gap.json.
"""
from __future__ import annotations
import argparse, json, os, statistics, subprocess, sys, time, tempfile
from pathlib import Path
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import torch
from torch import nn

RESULTS = ROOT / 'benchmarks' / 'results'
MODEL, BITS, QMIN, QMAX = 'resnet_fmnist', 4, -8, 7
LAYERS = (nn.Conv2d, nn.Linear)

def _shape(w): return [-1] + [1] * (w.dim() - 1)

# ---------------------------------------------------------------- AIMET side (bench_env's python)
def aimet_dump(a):
    "AIMET AdaRound on seed `a.seed`: save its returned state dict, its exported encodings and its CPU time."
    torch.set_num_threads(1)
    from benchmarks.adaround import fmnist, load_model, AIMET_CFG
    from aimet_torch.adaround import Adaround, AdaroundParameters
    from aimet_torch.common.defs import QuantScheme
    data = fmnist()
    model = load_model(MODEL, data).eval()
    calib = data.calib(a.calib, bs=a.bs, seed=a.seed)
    x = torch.cat([c[0] for c in calib]); y = torch.cat([c[1] for c in calib])
    dl = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=a.bs, shuffle=False)
    work = Path(tempfile.mkdtemp(prefix='aimet_'))
    (work / 'cfg.json').write_text(json.dumps(AIMET_CFG).replace('PERCH', 'True'))
    params = AdaroundParameters(data_loader=dl, num_batches=len(dl), default_num_iterations=a.iters)
    torch.manual_seed(a.seed)   # AIMET draws its minibatches from torch's global generator
    c0 = time.process_time()
    ada = Adaround.apply_adaround(model, x[:1], params, path=str(work), filename_prefix='ada', default_param_bw=BITS,
                                  default_quant_scheme=QuantScheme.post_training_tf_enhanced, default_config_file=str(work / 'cfg.json'))
    cpu = time.process_time() - c0
    enc = json.loads((work / 'ada.encodings').read_text())['param_encodings']
    torch.save(dict(sd=ada.state_dict(), enc=enc, cpu=cpu, training=ada.training), a.out)

def aimet_sim(a):
    "Score state dicts inside AIMET's QuantizationSimModel with their param encodings loaded (weights of Conv/Linear only)."
    torch.set_num_threads(1)
    from benchmarks.adaround import fmnist, load_model, AIMET_CFG
    from aimet_torch.quantsim import QuantizationSimModel
    from aimet_torch.nn import BaseQuantizationMixin
    from aimet_torch.common.defs import QuantScheme
    from fasterquant.data.datasets import accuracy_of
    data = fmnist()
    out = {}
    for key, path in json.loads(a.jobs).items():
        d = torch.load(path, weights_only=False)
        model = load_model(MODEL, data).eval(); model.load_state_dict(d['sd'])
        work = Path(tempfile.mkdtemp(prefix='aimet_sim_'))
        (work / 'cfg.json').write_text(json.dumps(AIMET_CFG).replace('PERCH', 'True'))
        (work / 'p.encodings').write_text(json.dumps(dict(param_encodings=d['enc'], activation_encodings={})))
        sim = QuantizationSimModel(model, dummy_input=data.x_test[:1], quant_scheme=QuantScheme.post_training_tf_enhanced,
                                   default_param_bw=BITS, config_file=str(work / 'cfg.json'))
        n_bn_params = 0
        for name, m in sim.model.named_modules():
            if not isinstance(m, BaseQuantizationMixin): continue
            m.input_quantizers = nn.ModuleList([None for _ in m.input_quantizers])      # weight-only, as AdaRound itself runs
            m.output_quantizers = nn.ModuleList([None for _ in m.output_quantizers])
            for pn in list(m.param_quantizers):
                if m.param_quantizers[pn] is not None and not (pn == 'weight' and isinstance(m.get_original_module(), LAYERS)):
                    n_bn_params += 1; m.param_quantizers[pn] = None                       # BN weight/bias: the default config quantizes them
        sim.set_and_freeze_param_encodings(str(work / 'p.encodings'))
        sim.model.eval()
        out[key] = dict(acc10k=accuracy_of(sim.model, data.x_test, data.y_test), acc1k=accuracy_of(sim.model, data.x_test[:1000], data.y_test[:1000]),
                        other_param_quantizers_disabled=n_bn_params)
    print(json.dumps(out))

# ---------------------------------------------------------------- helpers (system python)
def bn_of(model):
    "`{layer name: its following BatchNorm or None}`."
    from fasterquant.quantize.fold import bn_pairs
    pairs = bn_pairs(model)
    return {n: (model.get_submodule(pairs[n]) if n in pairs else None) for n, m in model.named_modules() if isinstance(m, LAYERS)}

def bn_k(bn): return (bn.weight / torch.sqrt(bn.running_var + bn.eps)).detach() if bn is not None else None

def aimet_weights(d, model):
    "AIMET's learned integers and scales per layer: its returned weights rounded on its exported encodings (as its sim does)."
    out = {}
    for n, m in model.named_modules():
        e = d['enc'].get(f'{n}.weight')
        if e is None: continue
        assert all(c['offset'] == QMIN and c['bitwidth'] == BITS and c['is_symmetric'] == 'True' for c in e), f"{n}: not a symmetric int4 grid"
        s = torch.tensor([c['scale'] for c in e])
        q = torch.round(d['sd'][f'{n}.weight'] / s.reshape(_shape(m.weight))).clamp(QMIN, QMAX)
        out[n] = (q, s)
    return out

def ours_unfolded(q, model):
    "Our learned integers and scales per layer in the unfolded model's terms: folding scales row c by k_c, its grid alike."
    bns, out = bn_of(model), {}
    for n, sp in q.specs.items():
        k = bn_k(bns[n]); s = sp.scale.float().clone(); qq = sp.q.float().clone()
        if k is not None:
            s = s / k
            neg = s < 0   # a negative BN gain flips the row: -q on a positive scale (none in this model; checked below)
            if neg.any(): raise ValueError(f"{n}: negative BatchNorm gain, not handled")
        out[n] = (qq, s)
    return out

def with_weights(model, qs):
    "A copy of the float `model` whose layers hold `scale * int`."
    import copy
    m = copy.deepcopy(model)
    with torch.no_grad():
        for n, (qq, s) in qs.items(): m.get_submodule(n).weight.copy_(qq * s.reshape(_shape(qq)))
    return m

def layer_inputs(model, x, names):
    "The float network's input to each layer on `x` (and its output after the following BatchNorm)."
    got, hs = {}, []
    for n in names: hs.append(model.get_submodule(n).register_forward_pre_hook(lambda m, a, n=n: got.__setitem__(n, a[0].detach())))
    with torch.no_grad(): model(x)
    for h in hs: h.remove()
    return got

def layer_table(model, qs_by_method, x):
    "Per layer: reconstruction error of `bn(layer(x))` (float inputs, both methods the same), grid and rounding statistics."
    bns = bn_of(model)
    names = [n for n, m in model.named_modules() if isinstance(m, LAYERS)]
    xin = layer_inputs(model, x, names)
    from fasterquant.quantize.engine import _trace, post_chain, _post_fn
    graph, _ = _trace(model, set(names))
    node = {n.target: n for n in graph.nodes if n.op == 'call_module' and n.target in names}
    rows = []
    for n in names:
        layer, bn = model.get_submodule(n), bns[n]
        fwd = (lambda w, layer=layer: nn.functional.linear(xin[n], w, layer.bias)) if isinstance(layer, nn.Linear) else \
              (lambda w, layer=layer: layer._conv_forward(xin[n], w, layer.bias))
        post = (lambda t, bn=bn: bn(t)) if bn is not None else (lambda t: t)
        cd = -1 if isinstance(layer, nn.Linear) else 1
        act = _post_fn(post_chain(node[n], model), model)   # BN and the ReLU after it, where the network applies one: our target
        with torch.no_grad():
            w = layer.weight.detach(); y = post(fwd(w)); energy = float(y.pow(2).sum(cd).mean()); ya = act(fwd(w))
            row = dict(layer=n, n_weights=w.numel())
            for meth, qs in qs_by_method.items():
                qq, s = qs[n]; sf = s.reshape(_shape(w))
                yq = post(fwd(qq * sf))
                row[f'{meth}_mse'] = float((yq - y).pow(2).sum(cd).mean())
                row[f'{meth}_rel'] = row[f'{meth}_mse'] / energy
                row[f'{meth}_mse_act'] = float((act(fwd(qq * sf)) - ya).pow(2).sum(cd).mean())
                nearest = torch.round(w / sf).clamp(QMIN, QMAX)
                row[f'{meth}_changed'] = float((qq != nearest).float().mean())
                row[f'{meth}_clipped'] = float(((w / sf) < QMIN - 0.5).float().mean() + ((w / sf) > QMAX + 0.5).float().mean())
            if 'ours' in qs_by_method and 'aimet' in qs_by_method:
                r = qs_by_method['ours'][n][1] / qs_by_method['aimet'][n][1]
                row.update(scale_ratio_median=float(r.median()), scale_ratio_min=float(r.min()), scale_ratio_max=float(r.max()),
                           same_int=float((qs_by_method['ours'][n][0] == qs_by_method['aimet'][n][0]).float().mean()))
        rows.append(row)
    return rows

from contextlib import contextmanager
@contextmanager
def layer_output_target(on=True):
    "With `on`, the engine's reconstruction target is the layer's own output (no BatchNorm, no activation after it), as AIMET's for a conv followed by BN."
    from fasterquant.quantize import engine
    orig = engine.post_chain
    if on: engine.post_chain = lambda node, model, act=True: []
    try: yield
    finally: engine.post_chain = orig

class GridAdaRound:
    "Factory: our AdaRound started on given per-channel scales (`{layer: scale in the folded model's terms}`) instead of its MSE grid."
    @staticmethod
    def make(scales, **kw):
        from fasterquant.quantize.adaround import AdaRound
        from fasterquant.quantize.grid import QuantSpec, round_half_even
        class _A(AdaRound):
            def init_spec(self, w, dtype, granularity, name='weight'):
                sp = super().init_spec(w, dtype, granularity, name)
                s = scales[name].to(sp.scale.dtype).reshape(sp.scale.shape)
                q = round_half_even(w.detach().float() / s.reshape(_shape(w))).clamp(sp.qmin, sp.qmax).to(torch.int32)
                return QuantSpec(q, s, sp.zero_point, sp.dtype, sp.granularity)
        return _A('mse', **kw)

# ---------------------------------------------------------------- main
def main():
    p = argparse.ArgumentParser()
    p.add_argument('--seeds', type=int, default=3); p.add_argument('--swap-seeds', type=int, default=3)
    p.add_argument('--iters', type=int, default=500); p.add_argument('--calib', type=int, default=1024); p.add_argument('--bs', type=int, default=32)
    p.add_argument('--aimet-python', default=str(ROOT / 'bench_env' / 'bin' / 'python'))
    p.add_argument('--work', default=str(Path(tempfile.gettempdir()) / 'adaround_gap'))
    p.add_argument('--out', default=str(RESULTS / 'adaround_gap'))
    p.add_argument('--aimet-dump', action='store_true'); p.add_argument('--aimet-sim', action='store_true')
    p.add_argument('--seed', type=int, default=0); p.add_argument('--jobs', default='{}')
    a = p.parse_args()
    if a.aimet_dump: return aimet_dump(a)
    if a.aimet_sim: return aimet_sim(a)
    torch.set_num_threads(1)
    from benchmarks.adaround import fmnist, load_model
    from fasterquant.data.datasets import accuracy_of
    from fasterquant.quantize.quantizer import Quantizer
    from fasterquant.quantize.adaround import AdaRound
    work = Path(a.work); work.mkdir(parents=True, exist_ok=True)
    data = fmnist(); model = load_model(MODEL, data).eval()
    acc = lambda m, n=None: accuracy_of(m, data.x_test[:n], data.y_test[:n])
    res = dict(meta=dict(date=time.strftime('%Y-%m-%d %H:%M'), cpus=os.cpu_count(), torch=torch.__version__, iters=a.iters, calib=a.calib, bs=a.bs,
                         load_start=' '.join(f"{x:.1f}" for x in os.getloadavg())),
               float=dict(acc10k=acc(model), acc1k=acc(model, 1000)))
    log = lambda s: print(s, flush=True)
    log(f"float: {res['float']}")
    eng = dict(n_samples=a.calib, progress=False)

    def run_ours(seed, make=None, layer_only=False, **qkw):
        calib = data.calib(a.calib, bs=a.bs, seed=seed)
        crit = make(seed) if make else AdaRound(iters=a.iters, bs=a.bs, seed=seed, **eng)
        c0 = time.process_time()
        with layer_output_target(layer_only):
            q = Quantizer(model, granularity='channel', criteria=crit, dtype=f'int{BITS}', **qkw); q.quantize_model(calib)
        return q, time.process_time() - c0

    def run_aimet(seed):
        f = work / f'aimet_s{seed}_it{a.iters}.pt'
        if not f.exists():
            r = subprocess.run([a.aimet_python, __file__, '--aimet-dump', '--seed', str(seed), '--out', str(f), '--iters', str(a.iters),
                                '--calib', str(a.calib), '--bs', str(a.bs)], capture_output=True, text=True, cwd=ROOT,
                               env={**os.environ, 'OMP_NUM_THREADS': '1'})
            if r.returncode: raise RuntimeError(r.stderr[-2000:])
        return torch.load(f, weights_only=False), f

    # 1. both sides, same seeds, same scorer, two test sets
    seeds, runs, qs0, sims = range(a.seeds), [], {}, {}
    for seed in seeds:
        d, f = run_aimet(seed)
        qa = aimet_weights(d, model); ma = with_weights(model, qa)
        # what apply_adaround itself returns: its soft-rounded weights (floor + h), not yet on the grid
        import copy
        mret = copy.deepcopy(model); mret.load_state_dict(d['sd'])
        off = [((d['sd'][f'{n}.weight'] / s.reshape(_shape(q)) - q).abs() > 1e-3).float().mean() for n, (q, s) in qa.items()]
        q, cpu = run_ours(seed)
        qo = ours_unfolded(q, model); mo = with_weights(model, qo)
        a_fold, a_unf = acc(q.model), acc(mo)   # folded fake-quant model vs the same integers unfolded: float rounding only
        assert abs(a_fold - a_unf) <= 2e-4, f"our integers unfolded score {a_unf}, folded {a_fold}"
        of = work / f'ours_s{seed}.pt'
        torch.save(dict(sd=mo.state_dict(), enc={f'{n}.weight': [dict(bitwidth=BITS, dtype='int', is_symmetric='True', offset=QMIN, scale=float(v),
                                                                        min=float(QMIN * v), max=float(QMAX * v)) for v in s] for n, (_, s) in qo.items()}), of)
        sims[f'aimet_s{seed}'], sims[f'ours_s{seed}'] = str(f), str(of)
        runs += [dict(method='AIMET AdaRound', seed=seed, acc10k=acc(ma), acc1k=acc(ma, 1000), cpu_seconds=d['cpu'],
                      returned_acc10k=acc(mret), returned_off_grid=float(torch.stack(off).mean())),
                 dict(method='fasterquant AdaRound', seed=seed, acc10k=a_fold, acc1k=acc(q.model, 1000), cpu_seconds=cpu, acc10k_unfolded=a_unf)]
        log(f"  {runs[-2]}\n  {runs[-1]}")
        if seed == 0: qs0 = dict(ours=qo, aimet=qa, q=q)
    r = subprocess.run([a.aimet_python, __file__, '--aimet-sim', '--jobs', json.dumps(sims)], capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, 'OMP_NUM_THREADS': '1'})
    if r.returncode: raise RuntimeError(r.stderr[-2000:])
    sim = json.loads([l for l in r.stdout.splitlines() if l.startswith('{')][-1])
    for row in runs:
        s = sim[('aimet' if row['method'].startswith('AIMET') else 'ours') + f"_s{row['seed']}"]
        row.update(sim_acc10k=s['acc10k'], sim_acc1k=s['acc1k'], sim_other_param_quantizers_disabled=s['other_param_quantizers_disabled'])
    res['runs'] = runs
    log(f"AIMET sim scores: {sim}")

    # 2. per layer, seed 0, on the seed-0 calibration images through the float network
    x0 = torch.cat([b[0] for b in data.calib(a.calib, bs=a.bs, seed=0)])
    rtn = Quantizer(model, granularity='channel', criteria='mse', dtype=f'int{BITS}'); rtn.quantize_model()
    res['layers'] = layer_table(model, dict(ours=qs0['ours'], aimet=qs0['aimet'], rtn=ours_unfolded(rtn, model)), x0)
    res['rtn'] = dict(acc10k=acc(rtn.model), acc1k=acc(rtn.model, 1000))
    # round-to-nearest on AIMET's grid: what its grid alone is worth
    bns = bn_of(model)
    a_scales = {n: s for n, (_, s) in qs0['aimet'].items()}
    m_rtn_a = with_weights(model, {n: (torch.round(model.get_submodule(n).weight.detach() / s.reshape(_shape(model.get_submodule(n).weight))).clamp(QMIN, QMAX), s)
                                   for n, s in a_scales.items()})
    res['rtn_aimet_grid'] = dict(acc10k=acc(m_rtn_a), acc1k=acc(m_rtn_a, 1000))

    # 3. one ingredient at a time, on our side
    folded_scales = {n: (s * bn_k(bns[n]) if bns[n] is not None else s) for n, s in a_scales.items()}  # AIMET's grid in folded terms
    lr3 = lambda s: AdaRound(iters=a.iters, bs=a.bs, seed=s, lr=1e-3, **eng)
    swaps = [('ours (default: MSE grid, BN folded, target through BN and ReLU, lr 2e-2)', {}, None),
             ("lr 1e-3 (AIMET's Adam default)", {}, lr3),
             ('BatchNorm not folded (the target still runs through BN and ReLU: the same loss)', dict(fold_bn=False), None),
             ("AIMET's target: the raw layer output (BN not folded, no BN, no ReLU)", dict(fold_bn=False, layer_only=True), None),
             ("target without the ReLU (BN folded: the BN-scaled layer output)", dict(layer_only=True), None),
             ("AIMET's tf_enhanced grid (its seed-0 scales)", {}, lambda s: GridAdaRound.make(folded_scales, iters=a.iters, bs=a.bs, seed=s, **eng)),
             ("all three of AIMET's: its grid, its target, lr 1e-3", dict(fold_bn=False, layer_only=True),
              lambda s: GridAdaRound.make(a_scales, iters=a.iters, bs=a.bs, seed=s, lr=1e-3, **eng))]
    res['swaps'] = []
    for label, qkw, make in swaps:
        for seed in range(a.swap_seeds):
            if not qkw and make is None:
                row = next(x for x in runs if x['method'] == 'fasterquant AdaRound' and x['seed'] == seed)
                res['swaps'].append(dict(swap=label, seed=seed, acc10k=row['acc10k'], acc1k=row['acc1k'], cpu_seconds=row['cpu_seconds'])); continue
            q, cpu = run_ours(seed, make, **qkw)
            res['swaps'].append(dict(swap=label, seed=seed, acc10k=acc(q.model), acc1k=acc(q.model, 1000), cpu_seconds=cpu))
            log(f"  {res['swaps'][-1]}")
    res['meta']['load_end'] = ' '.join(f"{x:.1f}" for x in os.getloadavg())
    write(res, a)

def _ms(xs, k): v = [x[k] for x in xs]; return statistics.mean(v), min(v), max(v)

def summary(res):
    "Per method: mean (min–max) over seeds of each score; what the prose cites."
    out = {}
    for m in dict.fromkeys(r['method'] for r in res['runs']):
        xs = [r for r in res['runs'] if r['method'] == m]
        out[m] = {k: _ms(xs, k) for k in ('acc10k', 'acc1k', 'sim_acc10k', 'sim_acc1k', 'cpu_seconds')} | dict(n=len(xs))
    sw = {}
    for s in dict.fromkeys(r['swap'] for r in res['swaps']):
        xs = [r for r in res['swaps'] if r['swap'] == s]
        sw[s] = {k: _ms(xs, k) for k in ('acc10k', 'acc1k', 'cpu_seconds')} | dict(n=len(xs))
    return out, sw

def write(res, a):
    out, sw = summary(res)
    res['summary'], res['swap_summary'] = out, sw
    f = res['float']; pct = lambda v: f"{100*v:.2f}"
    rng = lambda t: f"{pct(t[0])} ({pct(t[1])}–{pct(t[2])})"
    L = ["# Where the AdaRound gap to AIMET came from", "",
         f"Generated by `benchmarks/adaround_gap.py` on {res['meta']['date']} ({res['meta']['cpus']} CPUs, torch {res['meta']['torch']}, one torch thread, "
         f"load average {res['meta']['load_start']} at start, {res['meta']['load_end']} at end). Fashion-MNIST SmallResNet (`resnet_fmnist`, shipped weights), "
         f"W4 per-channel symmetric weights (−8..7), float activations; {res['meta']['iters']} iterations per layer, batch {res['meta']['bs']}, "
         f"{res['meta']['calib']} calibration images per seed, the same images for both.", "",
         f"Float: **{pct(f['acc10k'])}%** on all 10,000 test images, **{pct(f['acc1k'])}%** on the first 1,000.", "",
         "## 1. The same weights, scored on the same test images", "",
         "Mean (min–max) over seeds. `accuracy_of`: fasterquant's scorer on the model holding `scale * int`; AIMET sim: the same weights in AIMET's "
         "`QuantizationSimModel` with the integer encodings loaded (`set_and_freeze_param_encodings`), weight-only.", "",
         "| method | seeds | 10,000 test images | first 1,000 | AIMET sim, 10,000 | AIMET sim, first 1,000 | CPU s |", "|---|---|---|---|---|---|---|"]
    for m, s in out.items():
        L.append(f"| {m} | {s['n']} | {rng(s['acc10k'])} | {rng(s['acc1k'])} | {rng(s['sim_acc10k'])} | {rng(s['sim_acc1k'])} | {s['cpu_seconds'][0]:.1f} |")
    ret = [r for r in res['runs'] if 'returned_acc10k' in r]
    L += ["", f"The model `apply_adaround` returns holds its soft-rounded weights (`floor(w/s) + h`), off the grid for "
          f"{100*statistics.mean(r['returned_off_grid'] for r in ret):.0f}% of the weights on average; scored as they are they give "
          f"{pct(statistics.mean(r['returned_acc10k'] for r in ret))}% on 10,000 images. The rows above round them on the exported encodings, "
          "as AIMET's sim does (its sim scores match)."]
    L += ["", f"Round to nearest: our MSE grid {pct(res['rtn']['acc10k'])}% (first 1,000: {pct(res['rtn']['acc1k'])}%), AIMET's seed-0 `tf_enhanced` grid "
          f"{pct(res['rtn_aimet_grid']['acc10k'])}% (first 1,000: {pct(res['rtn_aimet_grid']['acc1k'])}%).", "",
          "## 2. Per layer (seed 0)", "",
          "Inputs: the float network's activations at each layer on the seed-0 calibration images (the same for every method). "
          "MSE: squared error of the layer's output after its BatchNorm (the network's function, whatever the folding), summed over channels, "
          "averaged over samples and positions; rel: over the float output's energy. Scale ratio: our per-channel scale (unfolded) over AIMET's "
          "(median, min–max). Changed: weights whose integer differs from round-to-nearest on the method's own grid. Clipped: weights beyond the grid's ends.", "",
          "MSE after ReLU: the same through the ReLU that follows the BatchNorm where the network has one (stem and first conv of each block; "
          "our reconstruction target), else equal to MSE.", "",
          "| layer | weights | MSE RTN | MSE ours | MSE AIMET | rel ours | rel AIMET | after ReLU: RTN | ours | AIMET | scale ours/AIMET | clipped ours | clipped AIMET | changed ours | changed AIMET | same integer |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in res['layers']:
        L.append(f"| {r['layer']} | {r['n_weights']} | {r['rtn_mse']:.4g} | {r['ours_mse']:.4g} | {r['aimet_mse']:.4g} | {r['ours_rel']:.4f} | {r['aimet_rel']:.4f} | "
                 f"{r['rtn_mse_act']:.4g} | {r['ours_mse_act']:.4g} | {r['aimet_mse_act']:.4g} | "
                 f"{r['scale_ratio_median']:.3f} ({r['scale_ratio_min']:.2f}–{r['scale_ratio_max']:.2f}) | {100*r['ours_clipped']:.2f}% | {100*r['aimet_clipped']:.2f}% | "
                 f"{100*r['ours_changed']:.1f}% | {100*r['aimet_changed']:.1f}% | {100*r['same_int']:.1f}% |")
    L += ["", "## 3. One ingredient at a time (ours)", "", "| variant | seeds | 10,000 test images | first 1,000 | CPU s |", "|---|---|---|---|---|"]
    for k, s in sw.items():
        L.append(f"| {k} | {s['n']} | {rng(s['acc10k'])} | {rng(s['acc1k'])} | {s['cpu_seconds'][0]:.1f} |")
    L.append("")
    from fasterquant.core.utils import atomic_path
    o = Path(a.out)
    with atomic_path(o.with_suffix('.json')) as tmp: Path(tmp).write_text(json.dumps(res, indent=1))
    with atomic_path(o.with_suffix('.md')) as tmp: Path(tmp).write_text('\n'.join(L))
    print(f"wrote {o.with_suffix('.md')} and .json")

if __name__ == '__main__': main()
