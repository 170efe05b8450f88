"""What every results-writing benchmark shares: `--out` / `--render` options and the atomic .json + .md write."""
import json
from pathlib import Path
from fasterquant.core.utils import atomic_path

RESULTS = Path(__file__).parent / 'results'

def add_results_args(ap, name:str):
    "Add `--out` (default benchmarks/results/NAME, no suffix) and `--render` (rewrite the .md from the .json, run nothing)."
    ap.add_argument('--out', default=str(RESULTS / name), help="results path without suffix (.json and .md are written)")
    ap.add_argument('--render', action='store_true', help="only write the .md again from the .json")

def write_results(out, res:dict, markdown):
    "Write `res` as OUT.json and `markdown(res)` as OUT.md, each atomically."
    out = Path(out); out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(out.with_suffix('.json')) as p: Path(p).write_text(json.dumps(res, indent=1, default=str) + '\n')
    with atomic_path(out.with_suffix('.md')) as p: Path(p).write_text(markdown(res))
    print(f"wrote {out.with_suffix('.md')} and .json")

def rendered(a, markdown) -> bool:
    "With `--render`, rewrite OUT.md from OUT.json and say so (True): the caller then stops."
    if not a.render: return False
    out = Path(a.out)
    with atomic_path(out.with_suffix('.md')) as p: Path(p).write_text(markdown(json.loads(out.with_suffix('.json').read_text())))
    return True

_ISA = ('sse4_2', 'avx', 'avx2', 'fma', 'f16c', 'avx512f', 'avx512bw', 'avx512_vnni', 'avx_vnni', 'avx512_bf16', 'amx_int8', 'asimddp', 'i8mm')

def machine() -> str:
    "This CPU in words for a results file: its model name, the instruction sets that decide integer and float kernels, the core count and the ONNX Runtime version."
    import os, platform
    name, flags = platform.processor() or platform.machine(), set()
    try:
        for line in Path('/proc/cpuinfo').read_text().splitlines():
            k, _, v = line.partition(':')
            if k.strip() == 'model name' and name in ('', platform.machine(), platform.processor()): name = v.strip()
            if k.strip() in ('flags', 'Features'): flags |= set(v.split())
    except OSError: pass
    try: import onnxruntime; ort = f", onnxruntime {onnxruntime.__version__}"
    except ImportError: ort = ''
    return f"{name} ({platform.machine()}; {' '.join(f for f in _ISA if f in flags) or 'instruction sets unknown'}), {os.cpu_count()} cores{ort}"
