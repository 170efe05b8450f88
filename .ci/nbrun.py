"""The function `.ci/nbtest.py` hands to its worker processes (a module of its own, so the workers can import it)."""
import warnings
from nbdev.test import test_nb

def test_nb_isolated(f, **kw):
    "`test_nb` with the warning filters it found restored afterwards: the worker processes are reused, and a notebook that\n    silences warnings must not make a later notebook's `test_warns` see none."
    with warnings.catch_warnings(): return test_nb(f, **kw)
