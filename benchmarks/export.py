#!/usr/bin/env python
"""Exact QDQ export (`Quantizer.export_onnx`) against ONNX Runtime's own quantizers, on models trained on Fashion-MNIST.

For each model x {W8, W8A8, W4 channel, W4 group-32/64/128} x {RTN (MSE grid), AdaRound}: the accuracy PyTorch's
fake-quant model measures, the accuracy ONNX Runtime gets from the exported file, the file size against the float
ONNX, and ONNX Runtime CPU latency against the float ONNX (medians, runs interleaved in one process). Side by side,
ONNX Runtime's `quantize_static` (QDQ, per-channel, MinMax calibration on the same batches) and `MatMulNBitsQuantizer`
(blocked 4-bit, MatMul only) applied to the same float ONNX. Writes benchmarks/results/export.md and .json.

Run: nice python benchmarks/export.py [--models resnet_fmnist vit_fmnist] [--ada-iters 250] [--quick]"""
import argparse, json, time, platform, statistics, tempfile, warnings, logging
from pathlib import Path
import numpy as np, torch, onnx, onnxruntime as ort
from onnxruntime.quantization import quantize_static, QuantFormat, QuantType, CalibrationDataReader, CalibrationMethod
from fasterquant.quantize.quantizer import Quantizer
from fasterquant.onnx.export import export_float_onnx, export_report
from fasterquant.onnx.runtime import ort_session, ort_accuracy
from fasterquant.data.datasets import fashion_mnist, trained_model, accuracy_of
warnings.filterwarnings('ignore'); logging.getLogger().setLevel(logging.ERROR)

CONFIGS = [  # name, dtype, granularity, group_size, act_dtype
    ('W8', 'int8', 'channel', None, None), ('W8A8', 'int8', 'channel', None, 'uint8'), ('W4', 'int4', 'channel', None, None),
    ('W4 g32', 'int4', 'group', 32, None), ('W4 g64', 'int4', 'group', 64, None), ('W4 g128', 'int4', 'group', 128, None)]

def latencies(sess:dict, x1, x64, runs1=40, runs64=8):
    "Median seconds per run at batch 1 and 64 for every session, runs interleaved across sessions."
    t1, t64 = {k: [] for k in sess}, {k: [] for k in sess}
    for k, s in sess.items(): s.run(None, {s.get_inputs()[0].name: x64}); s.run(None, {s.get_inputs()[0].name: x1})  # warm up
    for i in range(max(runs1, runs64)):
        for k, s in sess.items():
            n = s.get_inputs()[0].name
            if i < runs1: t = time.perf_counter(); s.run(None, {n: x1}); t1[k].append(time.perf_counter() - t)
            if i < runs64: t = time.perf_counter(); s.run(None, {n: x64}); t64[k].append(time.perf_counter() - t)
    return {k: (statistics.median(t1[k]), statistics.median(t64[k])) for k in sess}

class Reader(CalibrationDataReader):
    def __init__(self, batches, name): self.it, self.name = iter(batches), name
    def get_next(self):
        b = next(self.it, None)
        return None if b is None else {self.name: b[0].numpy()}

def standard_float_onnx(net, sample, path):
    "The float ONNX a user would export by default (constant folding on: BatchNorm folded into the convs)."
    net.eval()
    torch.onnx.export(net, (sample,), str(path), dynamo=False, opset_version=17, input_names=['input'], output_names=['output'],
                      dynamic_axes={'input': {0: 'batch'}, 'output': {0: 'batch'}})
    return path

def ort_peers(fp, calib, d, group_sizes):
    "ONNX Runtime's own quantizers on the float ONNX `fp`: {name: path or reason}."
    out = {}
    for name, wt, at in [('ORT quantize_static W8A8', QuantType.QInt8, QuantType.QUInt8),
                         ('ORT quantize_static W4A16', QuantType.QInt4, QuantType.QUInt16)]:
        p = d/f"{name.split()[-1]}.onnx"
        try:
            quantize_static(str(fp), str(p), Reader(calib, 'input'), quant_format=QuantFormat.QDQ, per_channel=True,
                            weight_type=wt, activation_type=at, calibrate_method=CalibrationMethod.MinMax)
            out[name] = p
        except Exception as e: out[name] = f"failed: {type(e).__name__}: {str(e)[:80]}"
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
    m = onnx.load(str(fp))
    n_mm = sum(n.op_type == 'MatMul' for n in m.graph.node)
    for gs in group_sizes:
        name = f"ORT MatMulNBits g{gs}"
        if not n_mm: out[name] = 'n/a: no MatMul nodes (MatMulNBits quantizes MatMul only)'; continue
        q = MatMulNBitsQuantizer(onnx.load(str(fp)), bits=4, block_size=gs, is_symmetric=True)
        q.process()
        p = d/f"nbits{gs}.onnx"
        q.model.save_model_to_file(str(p))
        out[name] = p
    return out

def bench_model(name, data, calib, ada_iters, quick, d):
    net = trained_model(name)
    sample, x1, x64 = data.x_test[:1], data.x_test[:1].numpy(), data.x_test[:64].numpy()
    acc_float = accuracy_of(net, data.x_test, data.y_test)
    fp = standard_float_onnx(net, sample, d/'float.onnx')
    rows, files = [], {'float': fp}
    rows.append(dict(model=name, method='float', config='float32', criteria='-', layers='-', acc_torch=acc_float,
                     acc_ort=ort_accuracy(ort_session(fp, threads=2), data.x_test, data.y_test), bytes=fp.stat().st_size, key='float'))
    from fasterquant.quantize.adaround import AdaRound
    crits = [('RTN', lambda: 'mse')] + ([] if ada_iters == 0 else
             [('AdaRound', lambda: AdaRound('mse', iters=ada_iters, n_samples=512, progress=False))])
    configs = CONFIGS[:3] if quick else CONFIGS
    for cname, dt, g, gs, act in configs:
        for crit, make in crits:
            if crit == 'AdaRound' and dt == 'int8': continue   # at 8 bits rounding is not where accuracy is lost
            n_all = len(Quantizer(net).layers)
            ctx = {n: None for n, m in Quantizer(net).layers.items() if g == 'group' and m.weight.shape[1] % gs} or 'uniform'
            if ctx != 'uniform' and len(ctx) == n_all:
                rows.append(dict(model=name, method='fasterquant', config=cname, criteria=crit, layers=f"0/{n_all}", note='no layer has an input dim divisible by the group size'))
                continue
            t = time.perf_counter()
            q = Quantizer(net, dtype=dt, granularity=g, group_size=gs or 128, act_dtype=act, context=ctx, criteria=make())
            q.quantize_model(calib=calib if (act or crit != 'RTN') else None)
            t_q = time.perf_counter() - t
            key = f"{cname} {crit}"
            p = q.export_onnx(sample, d/f"{key.replace(' ', '_')}.onnx")
            rep = export_report(p, q)
            assert rep.max_abs_diff == 0, (name, key)
            files[key] = p
            rows.append(dict(model=name, method='fasterquant', config=cname, criteria=crit, layers=f"{len(q.specs)}/{n_all}",
                             acc_torch=accuracy_of(q.model, data.x_test, data.y_test),
                             acc_ort=ort_accuracy(ort_session(p, threads=2), data.x_test, data.y_test),
                             acc_ort_default=ort_accuracy(ort_session(p, threads=2, exact=False), data.x_test, data.y_test),
                             bytes=p.stat().st_size, quant_seconds=t_q, key=key, max_weight_diff=rep.max_abs_diff))
            print(name, key, {k: (round(v, 4) if isinstance(v, float) else v) for k, v in rows[-1].items() if k.startswith('acc') or k == 'bytes'}, flush=True)
    for pname, p in ort_peers(fp, calib, d, [] if quick else [32, 64, 128]).items():
        if isinstance(p, str): rows.append(dict(model=name, method='onnxruntime', config=pname, criteria='-', layers='-', note=p)); continue
        files[pname] = p
        rows.append(dict(model=name, method='onnxruntime', config=pname, criteria='-', layers='-', acc_torch=None,
                         acc_ort=ort_accuracy(ort_session(p, threads=2), data.x_test, data.y_test), bytes=p.stat().st_size, key=pname))
        print(name, pname, rows[-1]['acc_ort'], rows[-1]['bytes'], flush=True)
    sess = {k: ort_session(p, threads=1) for k, p in files.items()}
    sess.update({f"{k} folded": ort_session(p, threads=1, fold_weights=True) for k, p in files.items() if k != 'float' and not k.startswith('ORT')})
    lat = latencies(sess, x1, x64, *((10, 3) if quick else (40, 8)))
    fb = rows[0]['bytes']
    for r in rows:
        if 'key' not in r: continue
        r['size_ratio'] = fb / r['bytes']
        for sfx, k in [('', r['key']), ('_folded', f"{r['key']} folded")]:
            if k not in lat: continue
            r[f'lat1_ms{sfx}'], r[f'lat64_ms{sfx}'] = lat[k][0] * 1e3, lat[k][1] * 1e3
            r[f'lat1_vs_float{sfx}'], r[f'lat64_vs_float{sfx}'] = lat[k][0] / lat['float'][0], lat[k][1] / lat['float'][1]
    return rows

def fmt(v, f="{:.2f}"): return '-' if v is None else f.format(v)

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--models', nargs='+', default=None, help="trained_model names (default: resnet_fmnist vit_fmnist; timm_resnet18_fmnist works too, slowly)")
    ap.add_argument('--ada-iters', type=int, default=250, help="AdaRound iterations per layer (0: skip AdaRound)")
    ap.add_argument('--quick', action='store_true', help="3 configs, fewer latency runs (a smoke test)")
    ap.add_argument('--out', default=str(Path(__file__).parent/'results'))
    a = ap.parse_args()
    models = a.models or ['resnet_fmnist', 'vit_fmnist']
    torch.manual_seed(0)
    data = fashion_mnist()
    calib = data.calib(512, bs=64)
    t0, rows = time.perf_counter(), []
    with tempfile.TemporaryDirectory() as d:
        for m in models:
            md = Path(d)/m; md.mkdir()
            rows += bench_model(m, data, calib, a.ada_iters, a.quick, md)
    total = time.perf_counter() - t0
    lines = ["# Exact QDQ export vs ONNX Runtime's quantizers (Fashion-MNIST)", "",
             f"Generated by `python benchmarks/export.py{' --quick' if a.quick else ''}` in {total/60:.1f} min on {platform.machine()} "
             f"(torch {torch.__version__}, onnxruntime {ort.__version__}). Accuracy: top-1 on the 10,000 Fashion-MNIST test images, "
             "in PyTorch (fake-quant model) and in ONNX Runtime CPU (default graph optimizations) from the written file. "
             "Size: the float ONNX file (standard `torch.onnx.export`, BatchNorm folded) divided by the quantized file. "
             "Latency: ONNX Runtime CPU, one thread, median of interleaved runs in one process (batch 1 and batch 64), "
             "as a multiple of the float ONNX's time (below 1 is faster).", "",
             "ONNX Runtime sessions: `acc ORT` and the first latency pair use `ort_session` (graph optimizations on, "
             "`session.qdq_matmulnbits_accuracy_level=1` so fused INT4 MatMuls compute in float32, as measured in PyTorch); "
             "`acc ORT defaults` is onnxruntime's default session (its fused INT4 MatMul quantizes activations to int8 on the fly); "
             "`folded` is `ort_session(fold_weights=True)` (`session.disable_quant_qdq=1`: weights dequantized once at load, then the "
             "float graph optimized as usual). Peers run in onnxruntime's default session.", "",
             f"fasterquant: RTN on the MSE grid, or AdaRound on the same grid ({a.ada_iters} iterations per layer, 512 calibration images; 4-bit configs only: "
             "at 8 bits rounding is not where accuracy is lost); "
             "W8A8 adds uint8 activations calibrated (min/max) on the same 512 images; `group` keeps in float the layers whose input "
             "dim the group size does not divide (the `layers` column). onnxruntime: `quantize_static` (QDQ, per-channel weights, "
             "MinMax calibration on the same 512 images; W4A16 = INT4 weights with 16-bit activations, its closest to weight-only) and "
             "`MatMulNBitsQuantizer` (symmetric blocked INT4, MatMul nodes only), both applied to the float ONNX.", ""]
    for m in models:
        rs = [r for r in rows if r['model'] == m]
        lines += [f"## {m}", "", "| method | config | criteria | layers | acc PyTorch % | acc ORT % | ORT − PyTorch (points) | acc ORT defaults % | size ratio "
                  "| latency b1 vs float | latency b64 vs float | b1 folded | b64 folded |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in rs:
            if 'acc_ort' not in r: lines.append(f"| {r['method']} | {r['config']} | {r['criteria']} | {r['layers']} | {r.get('note', '')} |" + " |" * 8); continue
            dlt = None if r.get('acc_torch') is None else (r['acc_ort'] - r['acc_torch']) * 100
            x = lambda k: '-' if r.get(k) is None else f"{r[k]:.2f}x"
            lines.append(f"| {r['method']} | {r['config']} | {r['criteria']} | {r['layers']} | {fmt(r['acc_torch'] and r['acc_torch']*100)} | "
                         f"{r['acc_ort']*100:.2f} | {fmt(dlt, '{:+.2f}')} | {fmt(r.get('acc_ort_default') and r['acc_ort_default']*100)} | {x('size_ratio')} | "
                         f"{x('lat1_vs_float')} | {x('lat64_vs_float')} | {x('lat1_vs_float_folded')} | {x('lat64_vs_float_folded')} |")
        fl = rs[0]
        lines += ["", f"float ONNX: {fl['bytes']/1e3:.0f} kB, {fl['lat1_ms']:.2f} ms at batch 1, {fl['lat64_ms']:.2f} ms at batch 64.", ""]
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    (out/'export.md').write_text('\n'.join(lines) + '\n')
    (out/'export.json').write_text(json.dumps(dict(seconds=total, ada_iters=a.ada_iters, quick=a.quick, rows=rows), indent=1))
    print('\n'.join(lines))

if __name__ == '__main__': main()
