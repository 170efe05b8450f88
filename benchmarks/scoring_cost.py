"""What a sensitivity probe costs: fasterquant's scorer against the scorer before it and against `quantize_static` per node.

Three ways to score a node, timed on the same nodes of the same model, interleaved: `quantize_static(...,
nodes_to_quantize=[node])` (it calibrates again each time), then a session, a forward pass over the calibration
inputs and the distance to float; the scorer before this version (`OnnxSensitivity.probe_model`: the stored ranges,
no calibration, but the whole model quantized, opened and run per node, and the distance's reference side recomputed
per probe, in float64 as it then was); and the scorer now (`OnnxSensitivity.score`: one float run keeps the activations the targets' downstream
parts read, each probe quantizes and runs only what its node can change, the metric's reference side computed once),
timed end to end over every target, its one-time work included. Models: PP-OCRv6 text recognition (rapidocr wheel, 283
nodes after preparation, the default weight-op targets and every op type ORT quantizes) and the Fashion-MNIST ViT
trained here.

    python benchmarks/scoring_cost.py [--probes 12] [--repeats 3]
Writes benchmarks/results/scoring_cost.md and .json.
"""
import argparse, json, os, platform, statistics, tempfile, time, warnings, logging
from pathlib import Path
import numpy as np
from onnxruntime.quantization import quantize_static, QuantFormat
from fasterquant.sensitivity.onnx import OnnxSensitivity
from fasterquant.onnx.ops import ort_op_types
from fasterquant.onnx.graph import quiet_ort as _quiet
from fasterquant.onnx.feeds import FeedReader
from fasterquant.core.metrics import KL_PROB_FLOOR
from fasterquant.onnx.runtime import ort_session, run_feeds
from fasterquant.core.metrics import output_distance, get_metric
from results_io import add_results_args, write_results, rendered

def kl_prob_before(ref, out, eps=1e-10):
    "`kl_prob` as the scorer before computed it, per probe: every probability, in float64 (kept here to time that scorer as it was)."
    p, q = np.clip(ref.astype(np.float64), 0, None), np.clip(out.astype(np.float64), 0, None)
    return float((p * (np.log(p + eps) - np.log(q + eps))).sum(-1).mean())

def bench(name, make, n_probes, repeats, n_static, tmp, arena_ab=False):
    "Time the three scorers on `make()`'s model (an `OnnxSensitivity` factory taking `ranges=` and settings); `arena_ab`: also the scorer now without the shared arena."
    with _quiet(): sens = make(None)
    f = get_metric(sens.metric)   # quantize_static per node is charged today's distance, so it pays only for what quantize_static itself does
    f_before = kl_prob_before if sens.metric == 'kl_prob' else f
    nodes = sens.targets()
    t = time.perf_counter(); run_feeds(sens.model, sens.feeds); fwd = time.perf_counter() - t
    pick = [nodes[int(i)] for i in np.linspace(0, len(nodes) - 1, min(n_probes, len(nodes)))]
    static_pick = pick[::max(1, len(pick) // n_static)][:n_static]
    prep = Path(tmp) / 'prep.onnx'; prep.write_bytes(sens.model.SerializeToString())
    kw = dict(per_channel=sens.granularity.name == 'channel', weight_type=sens.weight_type, activation_type=sens.activation_type, reduce_range=sens.reduce_range)
    before, static, before_scores, runs, run_s, plain = [], [], {}, [], [], []
    for r in range(repeats):   # one round of each way per repeat, interleaved, so a slow spell of this shared machine hits all three
        for node in pick:  # the scorer before this version: whole model quantized, opened and run per node, reference side per probe
            t = time.perf_counter()
            outs = run_feeds(ort_session(sens.probe_model(node), providers=sens.providers), sens.feeds)
            s = output_distance(sens.reference, outs, f_before); before.append(time.perf_counter() - t)
            if r == 0: before_scores[node] = s
            if node in static_pick:  # quantize_static per node: calibrates again every time
                t = time.perf_counter()
                with _quiet():
                    quantize_static(prep, Path(tmp) / 'one.onnx', FeedReader(sens.feeds), quant_format=QuantFormat.QDQ, nodes_to_quantize=[node],
                                    op_types_to_quantize=sens.op_types, **kw)
                output_distance(sens.reference, run_feeds(Path(tmp) / 'one.onnx', sens.feeds), f); static.append(time.perf_counter() - t)
        with _quiet(): s2 = make(sens.ranges)   # the scorer now, end to end over every target (a fresh scorer each time: nothing cached but the ranges)
        t = time.perf_counter(); res = s2.score(progress=False); runs.append(time.perf_counter() - t); run_s.append(s2.run_s)
        if arena_ab:   # the same without the shared arena: each probe's session its own memory
            with _quiet(): s3 = make(sens.ranges, shared_arena=False)
            t = time.perf_counter(); s3.score(progress=False); plain.append(time.perf_counter() - t)
    now = statistics.median(runs) / len(nodes)
    old = [before_scores[n] for n in pick if n in res.scores]; new = [res.scores[n] for n in pick if n in res.scores]
    rank = lambda v: np.argsort(np.argsort(v))
    extra = {}
    if arena_ab: extra.update(plain_probe_s=statistics.median(plain) / len(nodes), arena_saving=1 - statistics.median(runs) / statistics.median(plain))
    if sens.metric == 'kl_prob':   # the pooled distance against the full float64 sum: what a call costs, how much it pools, how far it moves a score
        ref = np.concatenate([b[0] for b in sens.reference]); outs = run_feeds(ort_session(sens.probe_model(pick[0]), providers=sens.providers), sens.feeds)
        sens.distance_to_float(outs); t_new, t_old = [], []   # (the reference's side prepared by the first call)
        for _ in range(5):
            t = time.perf_counter(); sens.distance_to_float(outs); t_new.append(time.perf_counter() - t)
            t = time.perf_counter(); output_distance(sens.reference, outs, kl_prob_before); t_old.append(time.perf_counter() - t)
        extra.update(kl_call_s=statistics.median(t_new), kl_before_call_s=statistics.median(t_old), kl_kept=int((ref >= KL_PROB_FLOOR).sum()), kl_values=int(ref.size),
                     kl_max_rel_diff=float(max(abs(a - b) / b for a, b in zip(new, old) if b > 0)))
    row = dict(model=name, nodes=len(sens.model.graph.node), targets=len(nodes), probes=len(pick), static_probes=len(static_pick), repeats=repeats,
               n_samples=sum(len(next(iter(fd.values()))) for fd in sens.feeds), metric=sens.metric, float_forward_s=fwd,
               static_probe_s=statistics.median(static), before_probe_s=statistics.median(before), now_probe_s=now, now_total_s=statistics.median(runs),
               now_run_probe_s=statistics.median(run_s) / len(nodes),
               cut_off=s2.cut_off, vs_static=statistics.median(static) / now, vs_before=statistics.median(before) / now,
               max_score_diff=float(np.max(np.abs(np.subtract(old, new))) / max(old)),  # relative to the largest score probed
               rank_agreement=float(np.corrcoef(rank(old), rank(new))[0, 1]) if len(old) > 1 else 1.0, **extra)
    print(json.dumps(row), flush=True)
    return row

def markdown(res) -> str:
    rows = res['rows']
    L = ['# What a sensitivity probe costs', '', __doc__.split('\n\n')[1].replace('\n', ' '), '',
         f"{res['machine']}; ONNX Runtime's default threads. Per probe: medians over {rows[0]['repeats']} interleaved rounds (each: the sampled nodes the two old ways, then one whole `score()`) "
         "(`quantize_static`: fewer nodes, it is slow); the scorer now: the median of its whole `score()` runs over every target, divided by the targets, "
         "and of that the time its probes spent in ONNX Runtime's forward passes (`OnnxSensitivity.run_s`). "
         "Score agreement: the scorer now against the scorer before, on the sampled nodes.", '',
         '| model | targets | samples | float forward (s) | `quantize_static` per node (s) | scorer before, per probe (s) | scorer now, per probe (s) | of which forward passes (s) | now vs `quantize_static` | now vs before | largest score difference | rank correlation |',
         '|---|---|---|---|---|---|---|---|---|---|---|---|']
    for r in rows:
        L.append(f"| {r['model']} | {r['targets']} | {r['n_samples']} | {r['float_forward_s']:.3f} | {r['static_probe_s']:.3f} | {r['before_probe_s']:.3f} | "
                 f"{r['now_probe_s']:.3f} | {r['now_run_probe_s']:.3f} | {r['vs_static']:.1f}x | {r['vs_before']:.2f}x | {100*r['max_score_diff']:.3f}% of the top score | {r['rank_agreement']:.3f} |")
    big = [r for r in rows if r['nodes'] >= 200]
    L += ['', "**Targets** (issue 12): ≥ 20× faster than `quantize_static` per node, and ≥ 4× faster than the scorer before on a 200+ node model."]
    for r in big:
        L.append(f"- {r['model']}: {r['vs_static']:.1f}x vs `quantize_static` ({'met' if r['vs_static'] >= 20 else 'missed'}; 20× means {r['static_probe_s'] / 20:.3f} s per probe, "
                 f"and the forward passes alone take {r['now_run_probe_s']:.3f} s, {r['now_run_probe_s'] / r['float_forward_s']:.2f} of a whole forward pass), "
                 f"{r['vs_before']:.2f}x vs before ({'met' if r['vs_before'] >= 4 else 'missed'}).")
    for r in rows:
        if 'arena_saving' in r:
            L.append(f"- {r['model']}: the shared arena: {r['now_probe_s']:.3f} s per probe against {r['plain_probe_s']:.3f} s with a session's own memory ({100 * r['arena_saving']:.0f}% less), in the same rounds.")
        if 'kl_call_s' in r:
            L.append(f"- {r['model']}: `kl_prob` compares {r['kl_kept']:,} of the reference's {r['kl_values']:,} probabilities one by one ({100 * r['kl_kept'] / r['kl_values']:.3f}%) and pools the rest per position: "
                     f"{1000 * r['kl_call_s']:.1f} ms per call on a probe's four batches of outputs, stacking included (the float64 sum over all of them: {1000 * r['kl_before_call_s']:.0f} ms); on the sampled nodes the scores differ from the full sum's by {100 * r['kl_max_rel_diff']:.2f}% at most.")
    L += ['', "**Reading.** A probe used to be: quantize the whole model with one node quantized, open a session, run every calibration input "
          "through the whole model, then compute the distance with the reference's side (a log-softmax or logarithm of every reference output) again. "
          "Now a probe quantizes, opens and runs only the nodes its node can reach, fed with float activations kept from one extra float run: a node near the "
          "output costs a small part of a forward pass, the first node a whole one; the distance's reference side is computed once; and the sessions draw "
          "their memory from one arena kept warm across probes (`ort_session(shared_arena=True)`). The scores are the same up to float rounding and "
          "`kl_prob`'s pooling of the classes the reference gives less than 1e-6 (the scorer before sums every class). "
          "What is left per probe is mostly the forward passes of its downstream part (the column above), which no exact probe can skip: "
          "the rest is ORT's quantizer on the node and opening a session. Several probes per forward pass (one session serving every probe, as the issue "
          "suggests) would not help: ONNX Runtime cannot be fed in the middle of a graph, so each probe would run the whole model, and an earlier version of this "
          "script measured such a session as slower than separate ones (every weight and activation behind an `If` loses ONNX Runtime's weight pre-packing and fusions).",
          "",
          "**How the baselines are charged.** `quantize_static` per node calibrates again, quantizes, writes, opens and runs the whole model: several "
          "forward passes per node. It is charged today's distance (`kl_prob` pools the negligible classes and costs about 5 ms on PP-OCRv6), so it pays only "
          "for what `quantize_static` does. The scorer before is timed as it was, with its float64 distance over every one of the 32 × 40 × 18,710 probabilities "
          "(about 1 GB of temporaries per probe on PP-OCRv6; its time follows how fast the machine hands out fresh memory, and it moved by a factor of two "
          "between runs of the same code here). Versions of this table before the pooled `kl_prob` charged `quantize_static` that float64 distance too, 0.5–1 s "
          "per node, which is why they read up to 15.7× where this one reads less. Charged only for its own work, `quantize_static` costs a few forward "
          "passes per node, and 20× of that is below what the downstream forward passes of a probe alone take (the target lines above): out of reach of any "
          "probe that runs the model on the same calibration inputs.", '']
    return '\n'.join(L)

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--probes', type=int, default=12); ap.add_argument('--repeats', type=int, default=3)
    ap.add_argument('--static-probes', type=int, default=4)
    add_results_args(ap, 'scoring_cost')
    a = ap.parse_args()
    if rendered(a, markdown): return
    logging.getLogger().setLevel(logging.ERROR); warnings.simplefilter('ignore')
    from fasterquant.data.datasets import rapidocr_model, random_words, render_words, trained_model, load_data
    from fasterquant.onnx.export import export_float_onnx
    rows = []
    x = render_words(random_words(32, seed=0)); rec = rapidocr_model('PP-OCRv6_rec_small')
    feeds = [{'x': x[i:i+8]} for i in range(0, 32, 8)]
    with tempfile.TemporaryDirectory() as tmp:
        rows.append(bench('PP-OCRv6_rec_small (rapidocr 3.10.0), 32 words, weight ops (the default)',
                          lambda r, **k: OnnxSensitivity(rec, feeds, ranges=r, **k), a.probes, a.repeats, a.static_probes, tmp, arena_ab=True))
        rows.append(bench('PP-OCRv6_rec_small (rapidocr 3.10.0), 32 words, every ORT op type',
                          lambda r, **k: OnnxSensitivity(rec, feeds, ranges=r, op_types_to_quantize=ort_op_types(), **k), a.probes, a.repeats, a.static_probes, tmp))
        data = load_data('fashion_mnist')
        p = Path(tmp)/'vit.onnx'; export_float_onnx(trained_model('vit_fmnist'), data.x_test[:1], p)
        xv = data.x_train[:256].numpy()
        rows.append(bench('ViT (Fashion-MNIST, trained here), 256 images, every ORT op type',
                          lambda r, **k: OnnxSensitivity(p, xv, ranges=r, op_types_to_quantize=ort_op_types(), **k), a.probes, a.repeats, a.static_probes, tmp))
    res = dict(machine=f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores", rows=rows)
    write_results(a.out, res, markdown)

if __name__ == '__main__': main()
