"""A fingerprint of the ONNX path's behaviour on the PP-OCRv6 recognizer: per weight type and criteria, the grid `OnnxSensitivity` uses,
its 'auto' measurements, a hash of its weight grids and its distance to float; and a hash of the bytes `quantize_onnx` writes.

Run it at two commits and compare the outputs to show that a refactoring changed nothing (16 rendered words calibrate):

    PYTHONPATH=<tree> python benchmarks/onnx_fingerprint.py > fingerprint.json
"""
import sys, hashlib, json, tempfile, warnings
from pathlib import Path
warnings.filterwarnings('ignore')
import fasterquant
from fasterquant.data.datasets import rapidocr_model, random_words, render_words
from fasterquant.sensitivity.onnx import OnnxSensitivity
from fasterquant.onnx.qdq import quantize_onnx
print(fasterquant.__file__, file=sys.stderr)
rec = rapidocr_model('PP-OCRv6_rec_small')
x = render_words(random_words(16, seed=0))
calib = {'x': x}
out = {}
tmp = Path(tempfile.mkdtemp(prefix='fq_fingerprint.'))
def h(p): return hashlib.sha1(Path(p).read_bytes()).hexdigest()[:12]
for wt, crit in [('int4', 'auto'), ('int8', 'auto'), ('int4', 'output'), ('int4', 'mse'), ('int8', 'minmax')]:
    s = OnnxSensitivity(rec, calib, weight_type=wt, activation_type='int8', criteria=crit, progress=False, n_batches=2, batch_size=8)
    ov = {k: [float(p['scale'].sum()) for p in v] for k, v in sorted(s.weight_overrides.items())}
    out[f'{wt} {crit}'] = dict(grid=s.grid, dist={k: round(v, 9) for k, v in s.grid_distances.items()}, n_ov=len(ov), ov=hashlib.sha1(json.dumps(ov).encode()).hexdigest()[:12],
                               d=round(s.distance(), 9))
for wt, crit in [('int8', 'minmax'), ('int4', 'mse'), ('int4', 'output'), ('int4', 'gptq')]:
    p = quantize_onnx(rec, tmp / f'{wt}_{crit}.onnx', calib, weight_type=wt, criteria=crit, **({'progress': False} if crit == 'gptq' else {}))
    out[f'file {wt} {crit}'] = h(p)
print(json.dumps(out, indent=1))
for f in tmp.iterdir(): f.unlink()
tmp.rmdir()
