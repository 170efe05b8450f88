"""Does an INT8 or INT4 file from `fasterquant onnx` run faster than float in ONNX Runtime on a real pretrained model, and do the
chain nodes of its default (Relu/Clip, pooling, residual Add, Concat between quantized nodes) pay?

PP-OCRv6 text recognition (rapidocr 3.10.0 wheel), prepared by `prepare_onnx`, INT8 per channel, minmax on 32 rendered
words. Rows: float; plain `quantize_static` (all op types, and Conv/MatMul/Gemm); fasterquant's default (the weight ops
and their chain nodes, `chain_nodes`: a Relu/Clip/pooling reading a quantized node, an Add/Concat all of whose computed
inputs come from quantized or chain nodes, each kept only when a quantized or chain node reads it; uint8 activations, what
ONNX Runtime's x86 kernels take; float nodes read float where that costs no integer kernel, `float_inputs='free'`);
the default with every float node reading float (`float_inputs='all'`, the placement before: a Conv whose output a float
node reads loses its `QLinearConv`); the default with int8 activations (ORT converts int8 Q/DQ pairs to uint8 only where a
tensor has one reader); the weight ops alone (`chains=False`); the default file in a session that dequantizes the weights
once at load (`ort_session(fold_weights=True)`); W4A8 (every weight op at 4 bits, GPTQ's learned rounding), its
4-bit weights widened to 8 bits by a `Cast` ONNX Runtime folds at load (`widen_4bit`), and the same file without those casts;
ONNX Runtime's own INT4 (`MatMulNBitsQuantizer`, RTN, MatMul weights only).
Columns: exact-word accuracy on 200 other words, how many Conv run as ORT's integer `QLinearConv` after its graph
optimizations, and latency as a ratio to float at batch 1 and 8 with 1 and 2 threads (median of interleaved runs; ONNX
Runtime's default session settings, each session opened alone for its turn, `ort_latency(alone=True)`).

    python benchmarks/onnx_speed.py [--runs 20]
Writes benchmarks/results/onnx_speed.md and .json.
"""
import argparse, collections, json, os, platform, tempfile, warnings, logging
from pathlib import Path
import numpy as np, onnx
from onnxruntime.quantization import quantize_static, QuantFormat
from fasterquant.onnx.prepare import prepare_onnx
from fasterquant.onnx.qdq import quantize_onnx, quantized_nodes
from fasterquant.onnx.feeds import FeedReader
from fasterquant.onnx.ops import default_op_types
from fasterquant.onnx.graph import in_dir as _in_dir, quiet_ort as _quiet
WEIGHT_OPS = tuple(default_op_types())
from fasterquant.onnx.runtime import ort_latency, op_counts, ort_optimized, ort_session, run_feeds
from fasterquant.data.datasets import rapidocr_model, random_words, render_words, ocr_charset, ctc_greedy, word_accuracy
from results_io import add_results_args, write_results, rendered, machine
from real_onnx import ort_int4

def unwidened(m:onnx.ModelProto) -> onnx.ModelProto:
    "`m` with the `Cast`s that widen its 4-bit weights removed: each `DequantizeLinear` reads the 4-bit integers again (what ORT's quantizer writes)."
    inits = {t.name for t in m.graph.initializer}
    casts = {n.output[0]: n.input[0] for n in m.graph.node if n.op_type == 'Cast' and n.input[0] in inits}
    for n in m.graph.node: n.input[:] = [casts.get(i, i) for i in n.input]
    keep = [n for n in m.graph.node if not (n.op_type == 'Cast' and n.output[0] in casts)]
    del m.graph.node[:]; m.graph.node.extend(keep)
    return m

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0]); ap.add_argument('--runs', type=int, default=20)
    add_results_args(ap, 'onnx_speed'); a = ap.parse_args()
    if rendered(a, markdown): return
    logging.getLogger().setLevel(logging.ERROR); warnings.simplefilter('ignore')
    rec = rapidocr_model('PP-OCRv6_rec_small'); charset = ocr_charset(rec)
    words = random_words(232, seed=0); x = render_words(words)
    calib = [{'x': x[i:i+8]} for i in range(0, 32, 8)]; test = [{'x': x[32+i:32+i+25]} for i in range(0, 200, 25)]
    d = Path(tempfile.mkdtemp(prefix='fq.speed.')); prep = prepare_onnx(rec); onnx.save(prep, str(d/'float.onnx'))
    chain_set = quantized_nodes(prep, WEIGHT_OPS, chains=True) - quantized_nodes(prep, WEIGHT_OPS)
    with _in_dir(d), _quiet():
        for name, ops in (('qs_all', None), ('qs_weights', list(WEIGHT_OPS))):
            quantize_static(d/'float.onnx', d/f'{name}.onnx', FeedReader(calib), quant_format=QuantFormat.QDQ, per_channel=True, op_types_to_quantize=ops)
        quantize_onnx(prep, d/'ours.onnx', calib, prepare=False)
        quantize_onnx(prep, d/'ours_alone.onnx', calib, prepare=False, chains=False)
        quantize_onnx(prep, d/'ours_all.onnx', calib, prepare=False, float_inputs='all')
        quantize_onnx(prep, d/'ours_s8.onnx', calib, prepare=False, activation_type='int8')
        quantize_onnx(rec, d/'w4.onnx', calib, weight_type='int4', criteria='gptq')   # prepared inside at the opset 4-bit weights need (21)
        onnx.save(unwidened(onnx.load(str(d/'w4.onnx'))), str(d/'w4_raw.onnx'))
        ort_int4(d/'float.onnx', d/'ort_int4.onnx', 'rtn', calib)
    rows = {'float': ('float', d/'float.onnx', {}), 'qs_all': ('plain quantize_static (all op types)', d/'qs_all.onnx', {}),
            'qs_weights': ('plain quantize_static (Conv/MatMul/Gemm)', d/'qs_weights.onnx', {}),
            'ours': (f'fasterquant default (weight ops + {len(chain_set)} chain nodes)', d/'ours.onnx', {}),
            'ours_all': ("fasterquant default, every float node reads float (float_inputs='all')", d/'ours_all.onnx', {}),
            'ours_s8': ('fasterquant default, int8 activations', d/'ours_s8.onnx', {}),
            'ours_alone': ('fasterquant weight ops alone (chains=False)', d/'ours_alone.onnx', {}),
            'ours_fold': ('fasterquant default, weights dequantized at load (fold_weights)', d/'ours.onnx', dict(fold_weights=True)),
            'w4': ('fasterquant W4A8, every weight op, GPTQ (4-bit weights widened at load)', d/'w4.onnx', {}),
            'w4_raw': ('fasterquant W4A8 without the widening casts', d/'w4_raw.onnx', {}),
            'ort_int4': ('ONNX Runtime INT4 RTN (MatMulNBits, MatMul weights only)', d/'ort_int4.onnx', {})}
    res = dict(model='PP-OCRv6_rec_small.onnx (rapidocr 3.10.0)', machine=machine(),
               chain=dict(collections.Counter(n.op_type for n in prep.graph.node if n.name in chain_set)),
               n_conv=sum(n.op_type == 'Conv' for n in prep.graph.node), rows={})
    for k, (label, path, kw) in rows.items():
        s = ort_session(path, **kw)
        p = np.concatenate([o[0] for o in run_feeds(s, test)])
        c = op_counts(ort_optimized(path, **kw))
        res['rows'][k] = dict(name=label, acc=word_accuracy(ctc_greedy(p, charset), words[32:]), mb=Path(path).stat().st_size / 1e6,
                              qlinearconv=c.get('com.microsoft:QLinearConv', 0), latency={})
        print(label, res['rows'][k], flush=True)
    for threads in (1, 2):
        for bs in (1, 8):
            ss = {k: (lambda path=path, kw=kw: ort_session(path, threads=threads, **kw)) for k, (_, path, kw) in rows.items()}   # opened alone in its turn
            lat = ort_latency(ss, x[:bs], runs=a.runs, rounds=5, alone=True)
            for k, v in lat.items(): res['rows'][k]['latency'][f"b{bs}_t{threads}"] = dict(s=v, ratio=v / lat['float'])
            print(threads, bs, {k: round(v / lat['float'], 2) for k, v in lat.items()}, flush=True)
    write_results(a.out, res, markdown)

def markdown(res) -> str:
    keys = list(next(iter(res['rows'].values()))['latency'])
    L = [f"# INT8 and INT4 speed in ONNX Runtime on a real model: {res['model']}", '', __doc__.split('\n\n')[1].replace('\n', ' '), '',
         f"{res['machine']}. {res['n_conv']} Conv in the model; chain nodes found: {res['chain']}.", '',
         '| model | exact-word acc | size (MB) | Conv as QLinearConv | ' + ' | '.join(f"time vs float, batch {k.split('_')[0][1:]}, {k.split('_t')[1]} thread(s)" for k in keys) + ' |',
         '|---|---|---|---|' + '---|' * len(keys)]
    for r in res['rows'].values():
        L.append(f"| {r['name']} | {100*r['acc']:.1f}% | {r['mb']:.2f} | {r['qlinearconv']} | " + ' | '.join(f"{r['latency'][k]['ratio']:.2f}" for k in keys) + ' |')
    r = res['rows']; fl = r['float']
    med = lambda x: float(np.median([x['latency'][k]['ratio'] for k in keys]))
    o, al, s8, a, f = (r[k] for k in ('ours', 'ours_all', 'ours_s8', 'ours_alone', 'ours_fold'))
    qs = max((r[k] for k in ('qs_all', 'qs_weights')), key=lambda x: x['acc'])
    L += ['', f"**Reading.** ONNX Runtime runs a quantized convolution on its integer kernel (`QLinearConv`) only where it finds `DQ → Conv → Q` with that Q as the "
          f"convolution's one reader. The default file keeps it so for every quantized node (a float reader of a convolution's output reads the DequantizeLinear copy) "
          f"and takes uint8 activations: {o['qlinearconv']} of {res['n_conv']} Conv run as `QLinearConv`, median {med(o):.2f}x float time over the four settings, "
          f"{100*o['acc']:.1f}% of the words (float {100*fl['acc']:.1f}%; plain `quantize_static` at best {100*qs['acc']:.1f}% at {med(qs):.2f}x). "
          f"With every float node reading float (`float_inputs='all'`, the placement before) {al['qlinearconv']} Conv find their kernel and the file runs at {med(al):.2f}x "
          f"({100*al['acc']:.1f}%); with int8 activations {s8['qlinearconv']} do, at {med(s8):.2f}x ({100*s8['acc']:.1f}%); the weight ops alone {a['qlinearconv']}, at {med(a):.2f}x "
          f"({100*a['acc']:.1f}%); weights dequantized at load (`fold_weights=True`) {med(f):.2f}x."]
    if 'w4' in r:
        w4, wr, oi = (r[k] for k in ('w4', 'w4_raw', 'ort_int4'))
        L[-1] += (f" W4A8, every weight op at 4 bits with GPTQ: {100 * w4['acc']:.1f}% in {w4['mb']:.2f} MB ({o['mb']:.2f} MB at INT8, {fl['mb']:.2f} MB float), {w4['qlinearconv']} Conv as `QLinearConv`, median {med(w4):.2f}x float time; "
                  f"the same file without the widening casts {med(wr):.2f}x (its 4-bit weights dequantized at every run). "
                  f"ONNX Runtime's own INT4 (MatMul weights only, {oi['mb']:.2f} MB): {100 * oi['acc']:.1f}%, {med(oi):.2f}x.")
    return '\n'.join(L + [''])

if __name__ == '__main__': main()
