#!/usr/bin/env python
"""Run the notebooks' tests like `nbdev_test`, then print one closing line `N passed, N failed` (N = notebooks).
Usage: python .ci/nbtest.py [--flags slow] [--path GLOB] [--n_workers N]"""
import argparse, os, sys, time
from nbdev.config import get_config
from nbdev.doclinks import nbglob
from nbdev.test import _keep_file
from nbrun import test_nb_isolated   # (in .ci/, beside this script)
from fastcore.parallel import parallel
from fastcore.xtras import working_directory

def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument('--flags', default='', help='space separated test flags to run (e.g. slow)')
    p.add_argument('--path', default=None, help='a notebook or glob (default: all notebooks)')
    p.add_argument('--n_workers', type=int, default=2)
    a = p.parse_args()
    cfg = get_config()
    # notebooks run side by side: split the cores between them rather than oversubscribing
    os.environ.setdefault('OMP_NUM_THREADS', str(max(1, (os.cpu_count() or 1) // max(1, a.n_workers))))
    files = [f.absolute() for f in sorted(nbglob(a.path, as_path=True)) if _keep_file(f, '.notest')]
    if not files: print('0 passed, 1 failed: no notebooks found'); sys.exit(1)
    t0 = time.time()
    with working_directory(cfg.nbs_path):
        res = parallel(test_nb_isolated, files, skip_flags=cfg.tst_flags.split(), force_flags=a.flags.split(),
                       n_workers=a.n_workers, basepath=cfg.config_path, pause=0.01)
    for f, (ok, t) in zip(files, res): print(f"{'PASS' if ok else 'FAIL'} {t:7.1f}s  {f.relative_to(cfg.nbs_path)}")
    n_ok = sum(ok for ok, _ in res)
    print(f"total {time.time()-t0:.0f}s")
    print(f"{n_ok} passed, {len(res)-n_ok} failed")
    sys.exit(0 if n_ok == len(res) else 1)

if __name__ == '__main__': main()
