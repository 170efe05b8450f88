"""Where the time of a per-node sensitivity probe goes, and whether one ONNX Runtime session for every probe would pay.

Today's scorer (`OnnxSensitivity.score`) builds, per node, the model with only that node quantized (ORT's QDQ quantizer
on the stored ranges), opens a session and runs the calibration feeds. The alternative measured here is one session
for all probes: the float model holding the all-quantized model's Q/DQ nodes, every quantized input behind an
`If(gate)` (the quantized branch only runs when its gate is on; gates fed as one bool vector), so a probe is one run.
Both are timed side by side on the same nodes, with the float model's forward pass for scale, and the probe scores
compared (they must agree). Models: PP-OCRv6 text recognition (rapidocr wheel, every op type ORT quantizes: 200+
targets) and the Fashion-MNIST ViT trained here.

    python benchmarks/scoring_cost.py [--probes 20] [--repeats 3]
Writes benchmarks/results/scoring_cost.md and .json.
"""
import argparse, copy, json, os, platform, statistics, tempfile, time, warnings, logging
from pathlib import Path
import numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto
from onnxruntime.quantization.onnx_model import ONNXModel
from fasterquant.sensitivity.onnx import OnnxSensitivity, ort_op_types, _quiet
from fasterquant.onnx.runtime import ort_session, run_feeds
from fasterquant.core.metrics import output_distance, get_metric
from results_io import add_results_args, write_results, rendered

GATES, QDQ = 'fq_gates', ('QuantizeLinear', 'DequantizeLinear')

def gated_model(sens:OnnxSensitivity):
    "The float model with every quantized input of every target behind `If(gate)`: one session serves every probe."
    q = sens.quantized_model(nodes_to_quantize=sens.targets())  # every target quantized, the rest float
    m = copy.deepcopy(sens.model); g = m.graph
    have = {i.name for i in g.initializer}
    qdq = [n for n in q.graph.node if n.op_type in QDQ]
    defined = {o for n in g.node for o in n.output} | {i.name for i in g.input} | have
    clash = {o: o + '/fq_quantized' for n in qdq for o in n.output if o in defined}  # ORT's bias DequantizeLinear reuses the float bias's name
    for n in q.graph.node:
        n.input[:] = [clash.get(i, i) for i in n.input]
        if n.op_type in QDQ: n.output[:] = [clash.get(o, o) for o in n.output]
    g.initializer.extend(copy.deepcopy(i) for i in q.graph.initializer if i.name not in have)
    qprod = {o: n for n in qdq for o in n.output}
    vi = {v.name: v for v in list(g.value_info) + list(g.input) + list(g.output)}
    by_name, gated, extra = {n.name: n for n in g.node}, [], []
    for n in q.graph.node:
        if n.op_type in QDQ: continue
        f = by_name[n.name]
        diff = [i for i, (a, b) in enumerate(zip(f.input, n.input)) if a != b]
        if not diff: continue
        k = len(gated); gated.append(n.name); gate = f"{GATES}/{k}"
        g.initializer.append(numpy_helper.from_array(np.array(k, np.int64), f"{gate}/index"))
        extra.append(helper.make_node('Gather', [GATES, f"{gate}/index"], [gate], name=f"{gate}/Gather"))
        for i in diff:
            chain, todo = [], [n.input[i]]
            while todo:  # the Q/DQ nodes that make this input
                p = qprod.get(todo.pop())
                if p is not None: chain.insert(0, p); todo.extend(p.input)
            sfx = f"/g{k}_{i}"; ren = {o: o + sfx for p in chain for o in p.output}
            body = [helper.make_node(p.op_type, [ren.get(x, x) for x in p.input], [ren[o] for o in p.output], name=p.name + sfx,
                                     domain=p.domain, **{a.name: helper.get_attribute_value(a) for a in p.attribute}) for p in chain]
            def out_info(name, tp=vi.get(f.input[i])):
                if tp is None: return helper.make_tensor_value_info(name, TensorProto.FLOAT, None)
                v = copy.deepcopy(tp); v.name = name; return v
            then_g = helper.make_graph(body, f"then{sfx}", [], [out_info(ren[n.input[i]])])
            else_g = helper.make_graph([helper.make_node('Identity', [f.input[i]], [f.input[i] + sfx])], f"else{sfx}", [], [out_info(f.input[i] + sfx)])
            out = f"{gate}/input{i}"
            extra.append(helper.make_node('If', [gate], [out], name=f"{gate}/If{i}", then_branch=then_g, else_branch=else_g))
            f.input[i] = out
    g.node.extend(extra)
    g.input.append(helper.make_tensor_value_info(GATES, TensorProto.BOOL, [len(gated)]))
    del m.opset_import[:]; m.opset_import.extend(q.opset_import)
    ONNXModel(m).topological_sort()
    return m, gated

def bench(name, sens, n_probes, repeats):
    f = get_metric(sens.metric)
    nodes = sens.targets()
    t = time.perf_counter(); run_feeds(sens.model, sens.feeds); t = time.perf_counter() - t
    fwd = statistics.median([t] + [(lambda t0: (run_feeds(sens.model, sens.feeds), time.perf_counter() - t0)[1])(time.perf_counter()) for _ in range(repeats - 1)])
    t0 = time.perf_counter(); gm, gated = gated_model(sens); sess = ort_session(gm); t_build = time.perf_counter() - t0
    off = [sess.run(None, {**fd, GATES: np.zeros(len(gated), bool)}) for fd in sens.feeds]
    pick = [gated[int(i)] for i in np.linspace(0, len(gated) - 1, min(n_probes, len(gated)))]
    parts = dict(quantize=[], session=[], forward=[], one_session=[])
    old, new = [], []
    for r in range(repeats):
        for node in pick:  # interleaved: today's probe, then the one-session probe, on the same node
            a = time.perf_counter(); m = sens.probe_model(node); b = time.perf_counter(); s = ort_session(m, providers=sens.providers); c = time.perf_counter()
            outs = run_feeds(s, sens.feeds); d = time.perf_counter()
            parts['quantize'].append(b - a); parts['session'].append(c - b); parts['forward'].append(d - c)
            gates = np.zeros(len(gated), bool); gates[gated.index(node)] = True
            e = time.perf_counter(); gout = [sess.run(None, {**fd, GATES: gates}) for fd in sens.feeds]; parts['one_session'].append(time.perf_counter() - e)
            if r == 0:
                old.append(output_distance(sens.reference, outs, f)); new.append(output_distance(off, gout, f))
    med = {k: statistics.median(v) for k, v in parts.items()}
    today = med['quantize'] + med['session'] + med['forward']
    row = dict(model=name, nodes=len(sens.model.graph.node), targets=len(nodes), gated=len(gated), probes=len(pick), repeats=repeats,
               n_samples=sum(len(next(iter(fd.values()))) for fd in sens.feeds), float_forward_s=fwd, one_session_build_s=t_build,
               today_probe_s=today, **{f"{k}_s": v for k, v in med.items()}, forward_share=med['forward'] / today,
               speedup=today / med['one_session'], metric=sens.metric,
               max_score_diff=float(np.max(np.abs(np.subtract(old, new))) / max(old)),  # relative to the largest score probed
               rank_agreement=float(np.corrcoef(np.argsort(np.argsort(old)), np.argsort(np.argsort(new)))[0, 1]))
    print(json.dumps(row), flush=True)
    return row

def markdown(res) -> str:
    rows = res['rows']
    L = ['# Cost of a sensitivity probe: today\'s scorer vs one session for every probe', '', __doc__.split('\n\n')[1].replace('\n', ' '), '',
         f"{res['machine']}; medians over {rows[0]['repeats']} interleaved rounds of {rows[0]['probes']} probes spread over the targets.", '',
         '| model | targets | quantize (s) | session (s) | forward (s) | today per probe (s) | forward share | one session per probe (s) | one session vs today | one-session build (s) | largest score difference | rank correlation |',
         '|---|---|---|---|---|---|---|---|---|---|---|---|']
    for r in rows:
        L.append(f"| {r['model']} | {r['targets']} | {r['quantize_s']:.3f} | {r['session_s']:.3f} | {r['forward_s']:.3f} | {r['today_probe_s']:.3f} | "
                 f"{100*r['forward_share']:.0f}% | {r['one_session_s']:.3f} | {r['speedup']:.2f}x | {r['one_session_build_s']:.1f} | {100*r['max_score_diff']:.2f}% of the top score | {r['rank_agreement']:.3f} |")
    sp = [r['speedup'] for r in rows]; fs = [100 * r['forward_share'] for r in rows]
    slow = [r['one_session_s'] / r['forward_s'] for r in rows]
    L += ['', f"**Reading.** The forward pass over the calibration inputs is {min(fs):.0f}-{max(fs):.0f}% of a probe today; quantizing the one node "
          f"and opening a session are the rest. One session for every probe removes only that rest, and its gated graph runs {min(slow):.1f}-{max(slow):.1f}x "
          "the time of the plain probe model (every weight and activation behind an `If` loses ONNX Runtime's constant-weight pre-packing, "
          f"layout transforms and fusions), so it ends at {min(sp):.2f}-{max(sp):.2f}x today's speed: it does not reach the 4x asked for, and the "
          "per-node requantizing scorer stays. A faster scorer has to cut the forward work itself (recompute only downstream of the node, "
          "fewer samples for clearly unimportant nodes). "
          f"Nor are the gated probes the same measurement: their rank correlation with today's probes is {min(r['rank_agreement'] for r in rows):.2f}-"
          f"{max(r['rank_agreement'] for r in rows):.2f}; a likely cause, not isolated: in the all-quantized graph, ops that share their input's scale (Reshape, Transpose, ...) "
          "hand quantization parameters to their neighbours that a node quantized alone does not get.", '']
    return '\n'.join(L)

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--probes', type=int, default=20); ap.add_argument('--repeats', type=int, default=3)
    add_results_args(ap, 'scoring_cost')
    a = ap.parse_args()
    if rendered(a, markdown): return
    logging.getLogger().setLevel(logging.ERROR); warnings.simplefilter('ignore')
    from fasterquant.data.datasets import rapidocr_model, random_words, render_words, trained_model, load_data
    from fasterquant.onnx.export import export_float_onnx
    rows = []
    x = render_words(random_words(32, seed=0))
    with _quiet(): s = OnnxSensitivity(rapidocr_model('PP-OCRv6_rec_small'), [{'x': x[i:i+8]} for i in range(0, 32, 8)], op_types_to_quantize=ort_op_types())
    rows.append(bench('PP-OCRv6_rec_small (rapidocr 3.10.0), 32 words, every ORT op type', s, a.probes, a.repeats))
    data = load_data('fashion_mnist')
    with tempfile.TemporaryDirectory() as d:
        p = Path(d)/'vit.onnx'; export_float_onnx(trained_model('vit_fmnist'), data.x_test[:1], p)
        with _quiet(): s = OnnxSensitivity(p, data.x_train[:256].numpy(), op_types_to_quantize=ort_op_types())
        rows.append(bench('ViT (Fashion-MNIST, trained here), 256 images, every ORT op type', s, a.probes, a.repeats))
    res = dict(machine=f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores", rows=rows)
    write_results(a.out, res, markdown)

if __name__ == '__main__': main()
