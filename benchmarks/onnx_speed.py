"""Does an INT8 or INT4 file from `fasterquant onnx` run faster than float in ONNX Runtime on a real pretrained model, and do the
chain nodes of its default (Relu/Clip, pooling, residual Add, Concat between quantized nodes) pay?

PP-OCRv6 text recognition (rapidocr 3.10.0 wheel), prepared by `prepare_onnx`, INT8 per channel, minmax on 32 rendered
words. Rows: float; plain `quantize_static` (all op types, and Conv/MatMul/Gemm); fasterquant's default (the weight ops
and their chain nodes, `chain_nodes`: a Relu/Clip/pooling reading a quantized node, an Add/Concat all of whose computed
inputs come from quantized or chain nodes, each kept only when a quantized or chain node reads it; float nodes read float);
the weight ops alone (`chains=False`); the default with uint8 activations (ONNX Runtime's x86 kernels take uint8: it
converts int8 Q/DQ pairs only where a tensor has one reader); the default file in a session that dequantizes the weights
once at load (`ort_session(fold_weights=True)`); W4A8 (every weight op at 4 bits, GPTQ's learned rounding; int8 and uint8 activations), its
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
from results_io import add_results_args, write_results, rendered
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
        quantize_onnx(prep, d/'ours_u8.onnx', calib, prepare=False, activation_type='uint8')
        quantize_onnx(rec, d/'w4.onnx', calib, weight_type='int4', criteria='gptq')   # prepared inside at the opset 4-bit weights need (21)
        quantize_onnx(rec, d/'w4_u8.onnx', calib, weight_type='int4', activation_type='uint8', criteria='gptq')
        onnx.save(unwidened(onnx.load(str(d/'w4.onnx'))), str(d/'w4_raw.onnx'))
        ort_int4(d/'float.onnx', d/'ort_int4.onnx', 'rtn', calib)
    rows = {'float': ('float', d/'float.onnx', {}), 'qs_all': ('plain quantize_static (all op types)', d/'qs_all.onnx', {}),
            'qs_weights': ('plain quantize_static (Conv/MatMul/Gemm)', d/'qs_weights.onnx', {}),
            'ours': (f'fasterquant default (weight ops + {len(chain_set)} chain nodes)', d/'ours.onnx', {}),
            'ours_alone': ('fasterquant weight ops alone (chains=False)', d/'ours_alone.onnx', {}),
            'ours_u8': ('fasterquant default, uint8 activations', d/'ours_u8.onnx', {}),
            'ours_fold': ('fasterquant default, weights dequantized at load (fold_weights)', d/'ours.onnx', dict(fold_weights=True)),
            'w4': ('fasterquant W4A8, every weight op, GPTQ (4-bit weights widened at load)', d/'w4.onnx', {}),
            'w4_u8': ('fasterquant W4A8, uint8 activations', d/'w4_u8.onnx', {}),
            'w4_raw': ('fasterquant W4A8 without the widening casts', d/'w4_raw.onnx', {}),
            'ort_int4': ('ONNX Runtime INT4 RTN (MatMulNBits, MatMul weights only)', d/'ort_int4.onnx', {})}
    res = dict(model='PP-OCRv6_rec_small.onnx (rapidocr 3.10.0)', machine=f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
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
    o, a, u, f = (res['rows'][k] for k in ('ours', 'ours_alone', 'ours_u8', 'ours_fold'))
    med = lambda r: float(np.median([r['latency'][k]['ratio'] for k in keys]))
    L += ['', f"**Reading.** Quantized, only the convolutions whose output goes on to another quantized node find ORT's `DQ → Conv → Q` pattern: "
          f"{o['qlinearconv']} of {res['n_conv']} run as `QLinearConv` in the default file ({u['qlinearconv']} with uint8 activations), {a['qlinearconv']} with the "
          "weight ops alone; the rest feed float activations (decomposed GELU, HardSigmoid, Mul) that ORT's CPU provider has no integer kernel for, and "
          "run as a float Conv on weights dequantized at every run, without the float model's NCHWc layout. Median time vs float over the four settings: "
          f"default {med(o):.2f}x, uint8 activations {med(u):.2f}x, weight ops alone {med(a):.2f}x, weights dequantized at load {med(f):.2f}x. "
          + ("The chain nodes pay in time here" if med(o) < med(a) - 0.03 else "The chain nodes do not pay in time here")
          + f"; the INT8 file's sure gain on this model is its size ({o['mb']:.1f} vs {res['rows']['float']['mb']:.1f} MB), and `fold_weights=True` keeps that file at {med(f):.2f}x float time."]
    if 'w4' in res['rows']:
        w4, wu, wr, oi = (res['rows'][k] for k in ('w4', 'w4_u8', 'w4_raw', 'ort_int4'))
        L[-1] += (f" W4A8, every weight op at 4 bits with GPTQ: {100 * w4['acc']:.1f}% in {w4['mb']:.2f} MB, {w4['qlinearconv']} Conv as `QLinearConv`, median {med(w4):.2f}x float time "
                  f"({med(wu):.2f}x with uint8 activations, {wu['qlinearconv']} `QLinearConv`); the same file without the widening casts {med(wr):.2f}x (its 4-bit weights dequantized at every run). "
                  f"ONNX Runtime's own INT4 (MatMul weights only, {oi['mb']:.2f} MB): {100 * oi['acc']:.1f}%, {med(oi):.2f}x.")
    return '\n'.join(L + [''])

if __name__ == '__main__': main()
