#!/usr/bin/env python
"""Train the small models the package ships (fasterquant.data.datasets.EMBEDDED) and write their weights into
fasterquant/data/weights/, where `trained_model` finds them first. Run it after changing one of their recipes:

    python benchmarks/embed_weights.py [--names resnet_fmnist resnet_digits vit_fmnist]

Training is seeded but not bit-for-bit reproducible across machines and thread counts: the shipped files are what makes
the README's numbers reproducible, so rerun the benchmarks after regenerating them."""
import argparse, shutil, time
from fasterquant.data.datasets import EMBEDDED, trained_model, embedded_dir, recipe_file, cache_dir, load_data, accuracy_of, RECIPES

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--names', nargs='+', default=list(EMBEDDED), choices=list(EMBEDDED))
    a = ap.parse_args()
    embedded_dir().mkdir(parents=True, exist_ok=True)
    for n in a.names:
        t0 = time.time()
        m = trained_model(n, retrain=True)
        d = load_data(RECIPES[n]['data'])
        shutil.copyfile(cache_dir()/recipe_file(n), embedded_dir()/recipe_file(n))
        print(f"{n}: test accuracy {accuracy_of(m, d.x_test, d.y_test):.4f}, trained in {time.time() - t0:.0f}s -> {embedded_dir()/recipe_file(n)}")

if __name__ == '__main__': main()
