#!/usr/bin/env python
"""The main job's numbers, for the README: runs `fasterquant demo` (Fashion-MNIST SmallResNet -> INT4 RTN vs AdaRound
-> ONNX Runtime) and keeps its table and chart as benchmarks/results/demo.md, demo.json and demo.png.
Run: python benchmarks/demo.py"""
import shutil, tempfile
from pathlib import Path
from fasterquant.cli.demo import run_demo

def main(out=Path(__file__).parent/'results'):
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as d:
        res = run_demo(out=d, progress=False)
        for src, dst in [('results.md', 'demo.md'), ('results.json', 'demo.json'), ('demo.png', 'demo.png')]:
            shutil.copy(Path(d)/src, out/dst)
    print((out/'demo.md').read_text())

if __name__ == '__main__': main()
