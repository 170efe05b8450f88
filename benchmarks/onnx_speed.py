"""Is an INT8 or INT4 file from fasterquant faster than float in ONNX Runtime, on real models, and than the peers' files?

Each model (`--model`, the tasks of `real_onnx.py`: PP-OCRv6 text recognition and PP-OCR's direction classifier from the
rapidocr 3.10.0 wheel, EfficientNet-Lite0 and a 4-block ViT on Fashion-MNIST) is prepared by `prepare_onnx` and
calibrated on 32 inputs. Rows: float as shipped (every time is a ratio to it); float after `prepare_onnx` (ORT's
pre-processing, a written-out HardSwish fused: `fuse_hardswish`), the model every other row is quantized from; plain `quantize_static` (all op types, and Conv/MatMul/Gemm; ORT's defaults, uint8
activations, per channel); the previous default placement (int8 activations, every float node reading float); fasterquant's
default, every weight op quantized with its chain nodes (uint8 activations, float nodes reading float only where that costs
no integer kernel, `float_inputs='free'`); the same with every float node reading float (`float_inputs='all'`), with int8
activations, and with the weight ops alone (`chains=False`); what `fasterquant onnx` writes by default (coverage 0.9, at
most 20% of the weight ops in float, verified); W4A8 (every weight op at 4 bits, GPTQ's learned rounding, 4-bit weights
widened by a `Cast` ORT folds at load, `widen_4bit`) and the same file without those casts; ONNX Runtime's own INT4
(`MatMulNBits`, RTN, MatMul weights only) where the model has MatMul weights.
Columns: accuracy on the test inputs and its difference from float with its paired standard error, the nodes that run on
ONNX Runtime integer kernels after its graph optimizations (`QLinearConv`, `QLinearMatMul`, `QGemm`, `MatMulIntegerToFloat`...),
file size, and latency as a ratio to float at batch 1 and 8 with 1 and 2 threads (median of interleaved runs, each
session opened alone for its turn with ONNX Runtime's default options, `ort_latency(alone=True)`), and their median.

    python benchmarks/onnx_speed.py [--model ocr|cls|lite0|vit] [--runs 20]
Writes benchmarks/results/onnx_speed.md and .json (ocr), onnx_speed_cls.*, onnx_speed_lite0.*, onnx_speed_vit.*.
"""
import argparse, collections, os, tempfile, time, warnings, logging
from pathlib import Path
import numpy as np, onnx
from onnxruntime.quantization import quantize_static, QuantFormat
from fasterquant.onnx.prepare import prepare_onnx
from fasterquant.onnx.qdq import quantize_onnx, quantized_nodes
from fasterquant.onnx.feeds import FeedReader
from fasterquant.onnx.ops import default_op_types
from fasterquant.onnx.graph import in_dir as _in_dir, quiet_ort as _quiet
from fasterquant.onnx.runtime import ort_latency, op_counts, ort_optimized, ort_session, run_feeds
from fasterquant.sensitivity.onnx import OnnxSensitivity
from fasterquant.sensitivity.picker import suggest_exclusion
from fasterquant.core.progress import set_progress
from results_io import add_results_args, write_results, rendered, machine
from real_onnx import ort_int4, ocr_task, cls_task, fmnist_task

WEIGHT_OPS = tuple(default_op_types())
INT_KERNELS = ('QLinearConv', 'QLinearMatMul', 'QGemm', 'MatMulIntegerToFloat', 'DynamicQuantizeMatMul', 'MatMulInteger', 'ConvInteger')

def unwidened(m:onnx.ModelProto) -> onnx.ModelProto:
    "`m` with the `Cast`s that widen its 4-bit weights removed: each `DequantizeLinear` that reads a widened weight reads the 4-bit integers again, its zero point too (what ORT's quantizer writes); a weight sliced after its `Cast` (dead taps) stays widened."
    inits = {t.name for t in m.graph.initializer}
    casts = {n.output[0]: n.input[0] for n in m.graph.node if n.op_type == 'Cast' and n.input[0] in inits}
    for n in m.graph.node:
        if n.op_type == 'DequantizeLinear' and n.input[0] in casts:
            n.input[:] = [casts.get(x, x) if k in (0, 2) else x for k, x in enumerate(n.input)]
    read = {x for n in m.graph.node for x in n.input}
    keep = [n for n in m.graph.node if not (n.op_type == 'Cast' and n.output[0] in casts and n.output[0] not in read)]
    del m.graph.node[:]; m.graph.node.extend(keep)
    return m

def default_pick(path, calib, out, **kw) -> int:
    "What `fasterquant onnx` writes by default (coverage 0.9, `default_max_float`, verified); returns how many weight ops stay in float."
    with _quiet(): sens = OnnxSensitivity(path, calib, **kw)
    sc = sens.score(progress=False); mf = sens.default_max_float()
    v = sens.verified(suggest_exclusion(sc.scores, 0.9, max_float=mf, counted=sens.weighted()), list(sc.scores), time_budget=90, max_float=mf)
    with _quiet(): sens.quantize(out, v['excluded'])
    return len(v['excluded'])

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0]); ap.add_argument('--runs', type=int, default=20)
    ap.add_argument('--model', default='ocr', choices=['ocr', 'cls', 'lite0', 'vit'])
    ap.add_argument('--n-calib', type=int, default=32); ap.add_argument('--n-test', type=int, default=200)
    add_results_args(ap, 'onnx_speed'); a = ap.parse_args()
    if a.model != 'ocr' and a.out == str(Path(__file__).parent / 'results' / 'onnx_speed'): a.out += f'_{a.model}'
    if rendered(a, markdown): return
    logging.getLogger().setLevel(logging.ERROR); logging.getLogger('onnxruntime.quantization.matmul_nbits_quantizer').setLevel(logging.ERROR); warnings.simplefilter('ignore'); set_progress('quiet')
    d = Path(tempfile.mkdtemp(prefix='fq.speed.'))
    task = ocr_task(a, d) if a.model == 'ocr' else cls_task(a, d) if a.model == 'cls' else fmnist_task(a, d, a.model)
    calib, test = task.calib, task.test
    prep = prepare_onnx(task.path); onnx.save(prep, str(d/'prepared.onnx'))
    chain_set = quantized_nodes(prep, WEIGHT_OPS, chains=True) - quantized_nodes(prep, WEIGHT_OPS)
    has_matmul_weights = any(n.op_type == 'MatMul' and any(i in {t.name for t in prep.graph.initializer} for i in n.input) for n in prep.graph.node)
    t0 = {}
    with _in_dir(d), _quiet():
        for name, ops in (('qs_all', None), ('qs_weights', list(WEIGHT_OPS))):
            quantize_static(d/'prepared.onnx', d/f'{name}.onnx', FeedReader(calib), quant_format=QuantFormat.QDQ, per_channel=True, op_types_to_quantize=ops)
        quantize_onnx(prep, d/'before.onnx', calib, prepare=False, activation_type='int8', float_inputs='all')
        quantize_onnx(prep, d/'ours.onnx', calib, prepare=False)
        quantize_onnx(prep, d/'ours_all.onnx', calib, prepare=False, float_inputs='all')
        quantize_onnx(prep, d/'ours_s8.onnx', calib, prepare=False, activation_type='int8')
        quantize_onnx(prep, d/'ours_alone.onnx', calib, prepare=False, chains=False)
        t = time.perf_counter(); n_pick = default_pick(task.path, calib, d/'pick.onnx'); t0['pick'] = time.perf_counter() - t
        t = time.perf_counter(); quantize_onnx(task.path, d/'w4.onnx', calib, weight_type='int4', criteria='gptq', progress=False); t0['w4'] = time.perf_counter() - t
        onnx.save(unwidened(onnx.load(str(d/'w4.onnx'))), str(d/'w4_raw.onnx'))
        if has_matmul_weights: ort_int4(d/'prepared.onnx', d/'ort_int4.onnx', 'rtn', calib)
    rows = {'float': ('float, as shipped', Path(task.path)), 'prepared': ('float after `prepare_onnx` (ORT pre-processing, written-out HardSwish fused)', d/'prepared.onnx'),
            'qs_all': ('plain quantize_static (all op types)', d/'qs_all.onnx'),
            'qs_weights': ('plain quantize_static (Conv/MatMul/Gemm)', d/'qs_weights.onnx'),
            'before': ("fasterquant's previous default placement (int8 activations, every float node reads float)", d/'before.onnx'),
            'ours': (f'fasterquant, every weight op + {len(chain_set)} chain nodes (the default placement)', d/'ours.onnx'),
            'ours_all': ("the same, every float node reads float (float_inputs='all')", d/'ours_all.onnx'),
            'ours_s8': ('the same, int8 activations', d/'ours_s8.onnx'),
            'ours_alone': ('the same, weight ops alone (chains=False)', d/'ours_alone.onnx'),
            'pick': (f'`fasterquant onnx` default ({n_pick} weight ops in float, verified)', d/'pick.onnx'),
            'w4': ('fasterquant W4A8, every weight op, GPTQ (4-bit weights widened at load)', d/'w4.onnx'),
            'w4_raw': ('fasterquant W4A8 without the widening casts', d/'w4_raw.onnx')}
    if has_matmul_weights: rows['ort_int4'] = ('ONNX Runtime INT4 RTN (MatMulNBits, MatMul weights only)', d/'ort_int4.onnx')
    n_weight_ops = sum(n.op_type in WEIGHT_OPS and any(i in {t.name for t in prep.graph.initializer} for i in n.input[1:]) for n in prep.graph.node)
    res = dict(key=a.model, model=task.title, machine=machine(), what=task.what, n_test=a.n_test, n_weight_ops=n_weight_ops,
               chain=dict(collections.Counter(n.op_type for n in prep.graph.node if n.name in chain_set)), seconds=t0, rows={})
    right = {}
    for k, (label, path) in rows.items():
        p = np.concatenate([o[0] for o in run_feeds(ort_session(path), test)])
        right[k] = c = np.asarray(task.correct(p), float)
        diff = c - right['float']
        cnt = op_counts(ort_optimized(path))
        res['rows'][k] = dict(name=label, acc=float(c.mean()), vs_float=float(diff.mean()), se=float(diff.std(ddof=1) / np.sqrt(len(c))),
                              mb=Path(path).stat().st_size / 1e6, int_kernels=sum(v for o, v in cnt.items() if o.split(':')[-1] in INT_KERNELS),
                              kernels={o.split(':')[-1]: v for o, v in cnt.items() if o.split(':')[-1] in INT_KERNELS}, latency={})
        print(label, {x: y for x, y in res['rows'][k].items() if x != 'latency'}, flush=True)
    x = next(iter(test[0].values()))
    for threads in (1, 2):
        for bs in (1, 8):
            ss = {k: (lambda path=path: ort_session(path, threads=threads)) for k, (_, path) in rows.items()}   # opened alone in its turn
            lat = ort_latency(ss, {next(iter(test[0])): x[:bs]}, runs=a.runs, rounds=5, alone=True)
            for k, v in lat.items(): res['rows'][k]['latency'][f"b{bs}_t{threads}"] = dict(s=v, ratio=v / lat['float'])
            print(threads, bs, {k: round(v / lat['float'], 2) for k, v in lat.items()}, flush=True)
    write_results(a.out, res, markdown)

def _med(r) -> float: return float(np.median([v['ratio'] for v in r['latency'].values()]))

def markdown(res) -> str:
    keys = list(next(iter(res['rows'].values()))['latency'])
    acc = res['what']['acc']
    L = [f"# Speed in ONNX Runtime on a real model: {res['model']}", '', ' '.join(__doc__.split('\n\n')[1].split()), '',
         f"{res['machine']}. {res['n_weight_ops']} weight ops in the model; chain nodes found: {res['chain']}. {acc} on {res['n_test']} {res['what']['units']}.", '',
         f"| file | {acc} | vs float (paired s.e.) | nodes on integer kernels ({res['n_weight_ops']} weight ops in the model) | size (MB) | " + ' | '.join(f"time vs float, batch {k.split('_')[0][1:]}, {k.split('_t')[1]} thread(s)" for k in keys) + ' | median time vs float |',
         '|---|---|---|---|---|' + '---|' * len(keys) + '---|']
    for r in res['rows'].values():
        L.append(f"| {r['name']} | {100*r['acc']:.1f}% | {100*r['vs_float']:+.1f} ({100*r['se']:.1f}) | {r['int_kernels']} | {r['mb']:.2f} | "
                 + ' | '.join(f"{r['latency'][k]['ratio']:.2f}" for k in keys) + f" | **{_med(r):.2f}** |")
    r = res['rows']; fl, o, al, s8, b, p, w4 = (r[k] for k in ('float', 'ours', 'ours_all', 'ours_s8', 'before', 'pick', 'w4'))
    pre = f" The prepared float model alone: {_med(r['prepared']):.2f}x." if 'prepared' in r else ''
    qs = min((r[k] for k in ('qs_all', 'qs_weights')), key=_med)
    L += ['', f"**Reading.** ONNX Runtime runs a quantized convolution on its integer kernel only where it finds `DQ → Conv → Q` with that Q as the convolution's one reader, "
          f"and its x86 kernels take uint8 activations. The default placement keeps both: {o['int_kernels']} nodes on integer kernels ({res['n_weight_ops']} weight ops in the model; a MatMul of two activations counts too), "
          f"median {_med(o):.2f}x float time over the four settings at {100*o['acc']:.1f}% (float {100*fl['acc']:.1f}%); the previous default placement {b['int_kernels']} at {_med(b):.2f}x ({100*b['acc']:.1f}%); "
          f"every float node reading float {al['int_kernels']} at {_med(al):.2f}x; int8 activations {s8['int_kernels']} at {_med(s8):.2f}x. "
          f"What `fasterquant onnx` writes by default: {_med(p):.2f}x at {100*p['acc']:.1f}%; the fastest plain `quantize_static` file {_med(qs):.2f}x at {100*qs['acc']:.1f}%. "
          f"W4A8 (GPTQ): {_med(w4):.2f}x at {100*w4['acc']:.1f}% in {w4['mb']:.2f} MB ({o['mb']:.2f} MB at INT8, {fl['mb']:.2f} MB float); without the widening casts {_med(r['w4_raw']):.2f}x.{pre}"]
    if 'ort_int4' in r: L[-1] += f" ONNX Runtime's own INT4 (MatMul weights only): {_med(r['ort_int4']):.2f}x at {100*r['ort_int4']['acc']:.1f}%."
    return '\n'.join(L + [''])

if __name__ == '__main__': main()
