"""fasterquant against the decoder-LLM weight quantizers people use, side by side in one run: Intel AutoRound and HQQ on SmolLM2-135M-Instruct.

Runs in the peers' own environment (`bash benchmarks/setup_llm_peers.sh`, then `.venv-llm-peers/bin/python benchmarks/llm_peers.py`):
the peers never enter fasterquant's dependencies. Model, text, windows and columns are `benchmarks/llm.py`'s (its `evaluate`, `greedy`
and `PeakRSS`): perplexity and KL to float on the evaluation windows, greedy agreement with float, quantize time and peak memory.
Format, the same for every row: the linear layers inside the decoder layers at 4 bits in groups of 64; the tied `lm_head` / embedding
table left in float (the peers' default). Symmetric rows (AutoRound's default) against fasterquant's symmetric AWQ + GPTQ, zero-point
rows (HQQ's format) against fasterquant's unsigned AWQ + GPTQ.
- `autoround`: AutoRound 0.16.1 (sign-gradient descent on each decoder block's rounding and clipping), `--iters` steps per block
  (its default 200), on the same calibration windows as fasterquant (`--n-calib` x 256 tokens), 1 batch of 8;
- `hqq`: HQQ 0.2.8 (half-quadratic optimisation of each group's zero point, no calibration data), its 4-bit defaults;
- `rtn`: round to nearest on min-max groups (the floor both improve on), by fasterquant, with positive scales (the larger end
  at 7 or -8) and with signed ones (`MinMax(signed_scale=True)`: the larger end at -8 on whichever side, ONNX Runtime's and
  AutoRound's symmetric grid);
- fasterquant's AWQ + GPTQ on MSE grids, positive or signed scales; SignRound per decoder layer (200 signed steps on each
  layer's 7 linears together) with learned clipping (`clip=(0.5, 1.0)`, each scale a factor of the MSE grid's) on signed
  scales: AutoRound's two ingredients, on our engine; alone and after AWQ's scaling;
- ONNX rows, each a decoder file (key/value cache layout) run by ONNX Runtime with float32 compute: ONNX Runtime's own
  `MatMulNBitsQuantizer` on the float file (`export_float_onnx`, after `quant_pre_process`), RTN symmetric and HQQ, and fasterquant's
  AWQ + GPTQ file as `export_onnx` writes it (`MatMulNBits`), so the number is the one the deployed file computes; greedy agreement
  from `decode_steps`.
Each peer's weights are read back as float (its own dequantization) into the model that is evaluated: the function each one's
format computes. Times are this machine's, with `torch` threads as set (2 cores here).

    .venv-llm-peers/bin/python benchmarks/llm_peers.py [--only NAME ...] [--iters 200] [--n-calib 32] [--n-eval 64]
Writes benchmarks/results/llm_peers.md and .json (rows already in the .json are kept unless rerun).
"""
import argparse, copy, json, sys, tempfile, time, warnings
_here = sys.path.pop(0)   # benchmarks/transformers.py is named like the `transformers` package: import the package, not that file
import transformers  # noqa: F401
sys.path.insert(0, _here)
from pathlib import Path
import numpy as np, onnx, torch
from torch import nn
from fasterquant.all import *
from fasterquant.onnx.runtime import ort_session
from fasterquant.core.utils import atomic_path
from fasterquant.onnx.decoder import decode_steps
from results_io import add_results_args, write_results, rendered, machine
from llm import evaluate, greedy, agreement, PeakRSS, setup, DECODER_BLOCKS

def decoder_linears(model) -> dict:
    "`{name: nn.Linear}` inside the decoder layers (`lm_head` and the table excluded)."
    return {n: m for n, m in model.named_modules() if isinstance(m, nn.Linear) and '.layers.' in n}

def fq(model, calib, dtype, transforms=None, criteria='gptq own'):
    "fasterquant: decoder linears at `dtype` in groups of 64, the table in float."
    crit = {'gptq own': lambda: GPTQ(float_target=False), 'nearest': lambda: 'nearest', 'minmax': lambda: 'minmax',
            'minmax signed': lambda: Nearest(MinMax(signed_scale=True)), 'gptq own signed': lambda: GPTQ(MSE(signed_scale=True), float_target=False),
            'signround signed clip': lambda: SignRound(MSE(signed_scale=True), blocks=DECODER_BLOCKS, clip=(0.5, 1.0))}[criteria]()
    return Quantizer(model, criteria=crit, dtype=dtype, granularity='group', group_size=64, layer_types=[nn.Linear],
                     context={'lm_head': None}, transforms=transforms).quantize_model(calib)

def hqq(model, calib, nbits=4):
    "HQQ's 4-bit groups of 64 (zero point optimised, no data), read back as float weights."
    from hqq.core.quantize import BaseQuantizeConfig, HQQLinear
    m = copy.deepcopy(model)
    cfg = BaseQuantizeConfig(nbits=nbits, group_size=64)
    for name, lin in decoder_linears(m).items():
        h = HQQLinear(lin, quant_config=cfg, compute_dtype=torch.float32, device='cpu', del_orig=False)
        with torch.no_grad(): lin.weight.copy_(h.dequantize().reshape(lin.weight.shape).float())
    return m

def autoround(model, calib, tok, iters=200, sym=True):
    "AutoRound's 4-bit groups of 64 on the calibration windows, its fake-quantized weights read back as float."
    from auto_round import AutoRound
    m = copy.deepcopy(model)
    ids = torch.cat([b['input_ids'] for b in calib])
    ar = AutoRound(m, tok, bits=4, group_size=64, sym=sym, dataset=[ids[i:i + 8] for i in range(0, len(ids), 8)], iters=iters,
                   nsamples=len(ids), seqlen=ids.shape[1], batch_size=8, device_map='cpu', enable_torch_compile=False)
    qm, _ = ar.quantize()
    return qm

def onnx_files(model, calib, d:Path) -> dict:
    "The float decoder file (key/value cache layout, `export_float_onnx`) and that file after ONNX Runtime's `quant_pre_process`."
    from onnxruntime.quantization.shape_inference import quant_pre_process
    sample = dict(input_ids=calib[0]['input_ids'][:1, :32])
    f = d / 'float.onnx'
    export_float_onnx(model, sample, f)
    quant_pre_process(str(f), str(d / 'float_pre.onnx'), skip_symbolic_shape=True)   # ORT's documented first step: its quantizer finds the weights behind the exporter's Transposes
    return dict(float=f, pre=d / 'float_pre.onnx', sample=sample)

def ort_nbits(algo:str):
    "ONNX Runtime's `MatMulNBitsQuantizer` on the float decoder file: 'rtn' (its default, symmetric) or 'hqq' (zero point), 4 bits in groups of 64, the tied lm_head left in float."
    def f(model, calib, tok, it, d:Path):
        from onnxruntime.quantization import matmul_nbits_quantizer as mq
        files = onnx_files(model, calib, d)
        m = onnx.load(str(files['pre']))
        head = [n.name for n in m.graph.node if n.op_type in ('MatMul', 'Gemm') and 'logits' in n.output]   # the tied lm_head: kept in float, as every row here keeps it
        cfg = mq.HQQWeightOnlyQuantConfig(block_size=64, bits=4) if algo == 'hqq' else mq.DefaultWeightOnlyQuantConfig(block_size=64, is_symmetric=True)
        qz = mq.MatMulNBitsQuantizer(m, bits=4, block_size=64, is_symmetric=algo != 'hqq', nodes_to_exclude=head, algo_config=cfg)
        qz.process(); out = d / f'ort_{algo}.onnx'; qz.model.save_model_to_file(str(out), False)
        return out
    return f

def fq_onnx(model, calib, tok, it, d:Path):
    "fasterquant's AWQ + GPTQ, symmetric, exported (`MatMulNBits`, the table in float): the file that is deployed, run by ONNX Runtime."
    q = Quantizer(model, criteria=GPTQ(float_target=False), dtype='int4', granularity='group', group_size=64, layer_types=[nn.Linear],
                  context={'lm_head': None}, transforms='awq')
    q.quantize_model(calib)
    return q.export_onnx(dict(input_ids=calib[0]['input_ids'][:1, :32]), d / 'fq.onnx')

@torch.no_grad()
def evaluate_onnx(path, ev, ref, bs=8):
    "`(perplexity, mean KL(ref || file))` of a decoder file run by ONNX Runtime (float32 compute, empty key/value cache) on the windows `ev`."
    import math
    import torch.nn.functional as F
    sess = ort_session(path, exact=True)
    past = [(i.name, i.shape[1], i.shape[3]) for i in sess.get_inputs() if i.name.startswith('past_key_values')]
    nll, n, kl = 0., 0, 0.
    for i in range(0, len(ev), bs):
        b = ev[i:i + bs]
        feed = dict(input_ids=b.numpy(), attention_mask=np.ones(tuple(b.shape), np.int64), **{k: np.zeros((len(b), h, 0, dh), np.float32) for k, h, dh in past})
        lp = F.log_softmax(torch.from_numpy(sess.run(['logits'], feed)[0])[:, :-1].float(), -1)
        r = F.log_softmax(ref(input_ids=b, use_cache=False).logits[:, :-1].float(), -1)
        nll -= float(lp.gather(-1, b[:, 1:, None]).sum()); n += b[:, 1:].numel(); kl += float((r.exp() * (r - lp)).sum())
    return math.exp(nll / n), kl / n

# name -> (tool, weight dtype, function(model, calib, tokenizer, AutoRound iterations) -> the quantized model with float weights)
# ONNX rows: function(model, calib, tokenizer, iterations, folder) -> a decoder file, evaluated by ONNX Runtime
ROWS = {
    'rtn minmax, sym':      ('fasterquant round-to-nearest (min-max groups)', 'int4', lambda m, c, tok, it: fq(m, c, 'int4', criteria='minmax')),
    'rtn minmax signed, sym': ('fasterquant round-to-nearest (min-max groups, signed scales)', 'int4', lambda m, c, tok, it: fq(m, c, 'int4', criteria='minmax signed')),
    'fasterquant awq+gptq, sym': ('fasterquant AWQ + GPTQ', 'int4', lambda m, c, tok, it: fq(m, c, 'int4', 'awq')),
    'fasterquant awq+gptq signed, sym': ('fasterquant AWQ + GPTQ (signed scales)', 'int4', lambda m, c, tok, it: fq(m, c, 'int4', 'awq', 'gptq own signed')),
    'fasterquant signround signed clip, sym': ('fasterquant SignRound per decoder layer, learned clipping, signed scales', 'int4', lambda m, c, tok, it: fq(m, c, 'int4', criteria='signround signed clip')),
    'fasterquant awq+signround signed clip, sym': ('fasterquant AWQ, then SignRound per decoder layer, learned clipping, signed scales', 'int4', lambda m, c, tok, it: fq(m, c, 'int4', 'awq', 'signround signed clip')),
    'autoround, sym':       ('AutoRound 0.16.1', 'int4', lambda m, c, tok, it: autoround(m, c, tok, it)),
    'fasterquant awq+gptq, zero point': ('fasterquant AWQ + GPTQ', 'uint4', lambda m, c, tok, it: fq(m, c, 'uint4', 'awq')),
    'hqq, zero point':      ('HQQ 0.2.8', 'uint4', lambda m, c, tok, it: hqq(m, c)),
}
ONNX_ROWS = {
    'fasterquant awq+gptq, sym, ONNX file': ('fasterquant AWQ + GPTQ, exported (MatMulNBits)', 'int4', fq_onnx),
    'ort matmulnbits rtn, sym': ("ONNX Runtime's MatMulNBitsQuantizer, RTN", 'int4', ort_nbits('rtn')),
    'ort matmulnbits hqq, zero point': ("ONNX Runtime's MatMulNBitsQuantizer, HQQ", 'uint4', ort_nbits('hqq')),
}

def markdown(res) -> str:
    f = res['float']
    lines = ["# SmolLM2-135M-Instruct: fasterquant against AutoRound and HQQ\n",
             f"Machine: {res['machine']}; torch {res['torch']}, {res['threads']} threads. Calibration: {res['n_calib']} windows of 256 tokens; "
             f"evaluation: {res['n_eval']} windows of the disjoint half of the documents; greedy agreement over {res['n_prompts']} prompts x 32 tokens; "
             f"AutoRound {res['iters']} iterations per block. Decoder linears at 4 bits in groups of 64, the tied table in float, for every row. "
             "Written by `benchmarks/llm_peers.py` (in `.venv-llm-peers`). Peak MB: resident memory above the process's level when the row "
             "started; memory an earlier row freed is reused first, so it undercounts the later rows." + (f" {res['note']}" if res.get('note') else '') + "\n",
             "| row | tool | weights | perplexity | vs float | KL to float | greedy agreement | quantize s | peak MB |",
             "|---|---|---|---|---|---|---|---|---|",
             f"| float | | float32 | {f['ppl']:.3f} | 1.000 | 0 | 100% | | |"]
    for name, r in res['rows'].items():
        lines.append(f"| {name} | {r['tool']} | {r['format']} | {r['ppl']:.3f} | {r['ppl'] / f['ppl']:.3f} | {r['kl']:.4f} | {100 * r['agree']:.1f}% | "
                     f"{r['seconds']:.0f} | {r['peak_mb']:.0f} |")
    return '\n'.join(lines) + '\n'

def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--only', nargs='*', default=None, help=f"rows to run (default all): {', '.join(list(ROWS) + list(ONNX_ROWS))}")
    ap.add_argument('--iters', type=int, default=200, help="AutoRound's iterations per block (its default 200)")
    ap.add_argument('--n-calib', type=int, default=32)
    ap.add_argument('--n-eval', type=int, default=64)
    ap.add_argument('--n-prompts', type=int, default=8)
    ap.add_argument('--note', default=None, help="a remark on this run for the results file (e.g. what else shared the machine)")
    add_results_args(ap, 'llm_peers')
    a = ap.parse_args()
    out = Path(a.out).with_suffix('.json')
    if a.note is not None and out.exists():   # a remark added to the stored results, then rendered
        d = json.loads(out.read_text()); d['note'] = a.note
        with atomic_path(out) as t: Path(t).write_text(json.dumps(d, indent=1))
    if rendered(a, markdown): return
    warnings.filterwarnings('ignore'); set_progress('log')
    old = json.loads(out.read_text()) if out.exists() else {}
    model, tok, cal, ev, calib, prompts, pf, gf = setup(a.n_calib, a.n_eval, a.n_prompts)
    same = old.get('n_calib') == len(cal) and old.get('n_eval') == len(ev) and old.get('iters') == a.iters
    res = dict(machine=machine(), torch=torch.__version__, threads=torch.get_num_threads(), n_calib=len(cal), n_eval=len(ev),
               n_prompts=len(prompts), iters=a.iters, float=dict(ppl=pf), rows=dict(old.get('rows', {})) if same else {}, note=a.note)
    names = a.only if a.only is not None else list(ROWS) + list(ONNX_ROWS)
    bad = [n for n in names if n not in ROWS and n not in ONNX_ROWS]
    if bad: sys.exit(f"unknown rows {bad}: pick from {list(ROWS) + list(ONNX_ROWS)}")
    for name in names:
        if name in ONNX_ROWS:   # a decoder file, run by ONNX Runtime
            tool, dt, fn = ONNX_ROWS[name]
            with tempfile.TemporaryDirectory() as d:
                with PeakRSS() as mem:
                    t0 = time.perf_counter(); path = fn(model, calib, tok, a.iters, Path(d)); secs = time.perf_counter() - t0
                p, kl = evaluate_onnx(path, ev, model)
                gq = [decode_steps(path, pr, 32, threads=1, exact=True)[0] for pr in prompts]
                res['rows'][name] = dict(tool=tool, format=f"{dt} group 64, ONNX Runtime", ppl=p, kl=kl, agree=agreement(gq, gf), seconds=secs, peak_mb=mem.mb)
            print(name, json.dumps(res['rows'][name]), flush=True)
            write_results(a.out, res, markdown)
            continue
        tool, dt, fn = ROWS[name]
        with PeakRSS() as mem:
            t0 = time.perf_counter(); qm = fn(model, calib, tok, a.iters); secs = time.perf_counter() - t0
        qm.eval()
        p, kl = evaluate(qm, ev, model)
        res['rows'][name] = dict(tool=tool, format=f"{dt} group 64", ppl=p, kl=kl, agree=agreement(greedy(qm, prompts), gf), seconds=secs, peak_mb=mem.mb)
        print(name, json.dumps(res['rows'][name]), flush=True)
        write_results(a.out, res, markdown)
        del qm

if __name__ == '__main__': main()
