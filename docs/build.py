#!/usr/bin/env python
"""Build the fasterquant docs site from the notebooks, without Quarto.

    python docs/build.py               # run every notebook (as nbdev_test does: slow cells skipped), render, build site/
    python docs/build.py --no-execute  # fast: code and API entries only (show_doc cells and imports run, no outputs)
    python docs/build.py --serve       # the same as the default, then serve http://127.0.0.1:8000/fasterquant/ (live reload)

Steps: (1) each notebook of `nbs/` goes through nbdev's own notebook processors (`FilterDefaults`, what
`nbdev_proc_nbs` runs, minus its attempt to install Quarto) in a fresh process, at most `--workers` at a time, each
under a `--timeout`. By default every code cell runs, in the notebook's folder, like `nbdev_test` (cells flagged
with `tst_flags` such as `#|slow`, `#| eval: false` cells and `nbdev_export()` are skipped), so pages show outputs
and plots; a failing cell fails the build with one line naming the notebook and the cell. Results go to `_proc/`
and are cached in `.cache/docs/`, keyed by the notebook, the package sources, the settings, this script and the
files the notebook refers to, so an unchanged notebook is not run again (`--no-cache` runs everything).
`show_doc` renders a clean signature, the docstring and a Type | Default | Details table of the docments; nbdev's
automatic `show_doc` cells come in source order, never repeat an explicit one, and a class's entry comes before its
methods'. (2) each processed notebook becomes a Markdown page (`#| echo: false` hides code, markdown output is
inlined, images are written next to the page, progress bars are dropped, backticked API names are linked to their
entry; the page of an `all` module (`#| default_exp all`, `core.all`, ...) ends with the table of the names it
exports, read from the sources, each linked to its entry). (3) the navigation is generated from the folder structure
of `nbs/`, so new or renamed notebooks appear without editing any config. (4) `mkdocs build --strict` with Material renders `site/`.
All outputs (`_proc/`, `_docs/`, `site/`, `.cache/`) are git-ignored.
"""
from __future__ import annotations
import argparse, ast, base64, hashlib, inspect, json, os, re, shutil, subprocess, sys, tempfile, textwrap, time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT/'docs'
PROC, OUT, SITE = ROOT/'_proc', ROOT/'_docs', ROOT/'site'
MD = OUT/'md'
CACHE = ROOT/'.cache'/'docs'
INFO = OUT/'build.json'   # how the site was built (read by check_site.py)

# Navigation order of the `nbs/<area>/` folders; any other folder follows, alphabetically.
SECTIONS = {'quantize': 'Quantize', 'onnx': 'ONNX', 'sensitivity': 'Sensitivity', 'callbacks': 'Callbacks',
            'tutorials': 'Tutorials', 'data': 'Data', 'core': 'Core', 'cli': 'CLI'}

def section_title(name:str) -> str: return SECTIONS.get(name, name.replace('_', ' ').title())

def section_key(name:str): return (list(SECTIONS).index(name), '') if name in SECTIONS else (len(SECTIONS), name)

def _settings() -> dict:
    import configparser
    c = configparser.ConfigParser(); c.read(ROOT/'settings.ini')
    return dict(c['DEFAULT'])

def skip_flags() -> set:
    "The `tst_flags` of settings.ini (`slow`): cells flagged with one are never run, as in `nbdev_test`."
    return set(_settings().get('tst_flags', '').split())

def source_notebooks(nbs:Path=None) -> list:
    "The notebooks of `nbs/` that get a page, skipping `_private` and hidden files and folders."
    nbs = nbs or ROOT/_settings().get('nbs_path', 'nbs')
    return sorted(p for p in nbs.rglob('*.ipynb') if not any(s.startswith(('_', '.')) for s in p.relative_to(nbs).parts))

# ---------------------------------------------------------------- 1a. show_doc: signature, docstring, docments table
def _seg(src:str, node) -> str:
    s = ast.get_source_segment(src, node) if node is not None else None
    return ' '.join(s.split()) if s else ''

def _twin(sym):
    "The library's copy of `sym`, found through `_modidx.py`: a class defined in a notebook has no source `inspect` can read."
    import importlib
    q = getattr(sym, '__qualname__', None)
    if not q or '<' in q: return None
    try: idx = importlib.import_module(f"{_settings().get('lib_name', 'fasterquant')}._modidx").d['syms']
    except Exception: return None
    for mod, syms in idx.items():
        if f"{mod}.{q}" not in syms: continue
        try:
            o = importlib.import_module(mod)
            for a in q.split('.'): o = getattr(o, a)
            return o
        except Exception: return None

def _src_info(sym, twin:bool=True):
    "From the source of `sym` (a function, or a class's `__init__` / dataclass fields): the text of each parameter's annotation and default, its line, and the return annotation and its line."
    f, fields = sym, None
    if inspect.isclass(sym):
        init = sym.__dict__.get('__init__')
        if inspect.isfunction(init): f = init
        elif getattr(sym, '__dataclass_fields__', None) is not None: fields = True
        else:
            f = next((getattr(k, '__init__') for k in sym.__mro__[1:] if inspect.isfunction(k.__dict__.get('__init__'))), None)
            if f is None: return {}, None
    f = inspect.unwrap(f) if callable(f) else f
    try: src = textwrap.dedent(inspect.getsource(f))
    except (OSError, TypeError):
        t = _twin(sym) if twin else None
        return _src_info(t, False) if t is not None and t is not sym else ({}, None)
    try: tree = ast.parse(src)
    except SyntaxError: return {}, None
    node = next((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))), None)
    if node is None: return {}, None
    res = {}
    if isinstance(node, ast.ClassDef):  # dataclass: annotated fields of the class body
        if not fields: return {}, None
        for n in node.body:
            if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name):
                res[n.target.id] = dict(anno=_seg(src, n.annotation), default=_seg(src, n.value), line=n.lineno)
        return res, None
    a = node.args
    pos = a.posonlyargs + a.args
    defaults = [None] * (len(pos) - len(a.defaults)) + list(a.defaults)
    for p, d in zip(pos, defaults): res[p.arg] = dict(anno=_seg(src, p.annotation), default=_seg(src, d), line=p.lineno)
    for p, d in zip(a.kwonlyargs, a.kw_defaults): res[p.arg] = dict(anno=_seg(src, p.annotation), default=_seg(src, d), line=p.lineno)
    for p in (a.vararg, a.kwarg):
        if p is not None: res[p.arg] = dict(anno=_seg(src, p.annotation), default='', line=p.lineno)
    ret = dict(anno=_seg(src, node.returns), line=node.returns.lineno) if node.returns is not None else None
    return res, ret

def _fmt_anno(a) -> str:
    if a is inspect.Parameter.empty: return ''
    if isinstance(a, str): return a
    return inspect.formatannotation(a).replace('torch.nn.modules.module.', 'nn.')

def _fmt_default(d) -> str:
    if d is inspect.Parameter.empty: return ''
    return re.sub(r"<class '(?:[\w.]+\.)?(\w+)'>", r'\1', getattr(d, '__name__', None) or repr(d))

def _params(sym, nm:str):
    "[(kind, name, annotation, default)] of `sym`'s signature (without `self`), and the return annotation, as written in the source where it can be read."
    try: sig = inspect.signature(sym)
    except (ValueError, TypeError): return None, ''
    src, ret = _src_info(sym)
    ps = list(sig.parameters.values())
    if ps and ps[0].name in ('self', 'cls') and not inspect.isclass(sym): ps = ps[1:]
    res = []
    for p in ps:
        s = src.get(p.name, {})
        res.append((p.kind, p.name, s.get('anno') or _fmt_anno(p.annotation), s.get('default') or _fmt_default(p.default)))
    r = '' if inspect.isclass(sym) else (ret or {}).get('anno') or _fmt_anno(sig.return_annotation)
    return res, r

def _signature(sym, nm:str) -> str:
    "`def name(a:int=1, *, b=None)->T`, on one line when short, else one parameter per line; no comments."
    ps, ret = _params(sym, nm)
    name = nm.rsplit('.', 1)[-1]
    if ps is None:
        if inspect.isclass(sym): return f"class {name}({', '.join(b.__name__ for b in sym.__bases__ if b is not object)})"
        return f"{type(sym).__name__} {name}"
    P = inspect.Parameter
    parts, star = [], False
    for i, (kind, n, a, d) in enumerate(ps):
        if kind == P.KEYWORD_ONLY and not star: parts.append('*'); star = True
        if kind == P.VAR_POSITIONAL: star = True
        pre = '*' if kind == P.VAR_POSITIONAL else '**' if kind == P.VAR_KEYWORD else ''
        parts.append(pre + n + (f":{a}" if a else '') + (f"={d}" if d else ''))
        if kind == P.POSITIONAL_ONLY and (i + 1 == len(ps) or ps[i + 1][0] != P.POSITIONAL_ONLY): parts.append('/')
    kw = 'class' if inspect.isclass(sym) else 'async def' if inspect.iscoroutinefunction(sym) else 'def'
    r = f"->{ret}" if ret else ''
    one = f"{kw} {name}({', '.join(parts)}){r}"
    if len(one) <= 76: return one   # what fits the content column without scrolling
    return f"{kw} {name}(\n" + ''.join(f"    {p},\n" for p in parts) + f"){r}"

def _cell(s) -> str:
    "Text for a Markdown table cell: `|` escaped outside code spans, newlines as <br>."
    s = '' if s is None else str(s)
    parts = re.split(r'(`+[^`]*?`+)', s)
    return '<br>'.join(''.join(p if i % 2 else p.replace('|', r'\|') for i, p in enumerate(parts)).splitlines()).strip()

def _code(s:str) -> str:
    if not s: return ''
    n = max([0] + [len(m) for m in re.findall(r'`+', s)]) + 1
    pad = ' ' if s.startswith('`') or s.endswith('`') else ''
    return f"{'`' * n}{pad}{s}{pad}{'`' * n}"

def _param_table(sym, nm:str) -> str:
    "The docments as a Markdown table, like nbdev's classic `show_doc`: one row per parameter (Type | Default | Details) and a **Returns** row."
    from fastcore.docments import docments
    def dms(o):
        try: return docments(o, full=True)
        except Exception: return {}
    dm = dms(sym)
    if not any(v.get('docment') for v in dm.values()) and (t := _twin(sym)) is not None and t is not sym: dm = dms(t) or dm
    ps, ret = _params(sym, nm)
    if ps is None or not dm: return ''
    docs = {k: (v.get('docment') or '') for k, v in dm.items()}
    # A comment on the line that closes the signature, `last=1) -> T: # doc`, is given to the return by fastcore;
    # when the last parameter on that line has none, it documents that parameter.
    src, sret = _src_info(sym)
    if docs.get('return') and sret:
        same = [n for _, n, _, _ in ps if src.get(n, {}).get('line') == sret['line'] and not docs.get(n)]
        if same: docs[same[-1]], docs['return'] = docs['return'], ''
    rows = [(n, a, d, docs.get(n, ''), k) for k, n, a, d in ps]
    if not any(r[3] for r in rows) and not docs.get('return'): return ''
    P = inspect.Parameter
    def name(n, k): return ('\\*' if k == P.VAR_POSITIONAL else '\\*\\*' if k == P.VAR_KEYWORD else '') + n
    body = [[name(n, k), _code(a), _code(d), _cell(doc)] for n, a, d, doc, k in rows]
    if ret or docs.get('return'): body.append(['**Returns**', _code(ret), '', _cell(docs.get('return', ''))])
    cols = [i for i in (1, 2, 3) if any(r[i] for r in body)]
    hdr = ['', '**Type**', '**Default**', '**Details**']
    lines = ['| ' + ' | '.join([' '] + [hdr[i] for i in cols]) + ' |', '|' + '---|' * (len(cols) + 1)]
    lines += ['| ' + ' | '.join([r[0]] + [r[i] for i in cols]) + ' |' for r in body]
    return '<div class="fq-params" markdown>\n\n' + '\n'.join(lines) + '\n\n</div>'

def _showdoc_markdown(self) -> str:
    "Replaces `BasicMarkdownRenderer._repr_markdown_`: heading, source link, signature (no comments), docstring, docments table."
    from nbdev.doclinks import NbdevLookup
    from fastcore.docments import _ital_first
    sym = self.sym
    out = [f"{'#' * self.title_level} {self.nm}"]
    try: src = NbdevLookup().code(self.fn)
    except Exception: src = None
    if src: out.append(f'[source]({src}){{ .fq-source target="_blank" }}')
    out.append(_fence(_signature(sym, self.nm), 'python'))
    if self.docs and (getattr(sym, '__doc__', None) or not callable(sym)): out.append(_ital_first(self.docs))  # not a docstring inherited from a base
    tbl = _param_table(sym, self.nm)
    if tbl: out.append(tbl)
    return '\n\n'.join(out)

# ---------------------------------------------------------------- 1b. nbdev processors, patched
def _add_show_docs_begin(self):
    """nbdev's `add_show_docs`, fixed: automatic `show_doc` cells follow the order of the definitions in the cell
    (nbdev inserts them reversed), a `@patch`ed method that has an explicit `show_doc(Class.method)` gets no second
    automatic one (nbdev compares the bare name), and an explicit one-line `show_doc(Class)` placed after some of
    the class's methods' entries moves up to where the class is defined, so the class comes before its methods."""
    from nbdev.processors import _want_doc, _show_docs, _get_nm, cell_lang, _def_types
    from nbdev.showdoc import showdoc_nm
    from execnb.nbio import mk_cell
    nb = self.nb
    cells = list(nb.cells)
    explicit, single = {}, {}
    for i, c in enumerate(cells):
        if c.cell_type != 'code' or not c.source: continue
        trees = c.parsed_() or []
        sds = _show_docs(trees)
        for t in sds:
            try: nm = _get_nm(t)
            except Exception: continue
            explicit.setdefault(nm, i)
            if len(trees) == 1 and explicit[nm] == i: single[nm] = i
    def defs(c): return [o for o in (c.parsed_() or []) if isinstance(o, _def_types) and (o.name[0] != '_' or o.name[:2] == '__')]
    exports = [i for i, c in enumerate(cells) if _want_doc(c)]
    entries = []  # (cell index, name) of every entry, automatic or explicit
    for i in exports:
        if cell_lang(cells[i]) != 'python': raise ValueError(f"{cells[i].metadata.language} can't export:\n{cells[i].source}")
        entries += [(i, showdoc_nm(o)) for o in defs(cells[i]) if showdoc_nm(o) not in explicit]
    entries += [(i, nm) for nm, i in explicit.items()]
    move = {}  # definition cell -> [class names whose explicit show_doc cell moves there]
    for d in exports:
        for o in defs(cells[d]):
            if not isinstance(o, ast.ClassDef) or o.name not in single: continue
            e = single[o.name]
            if e > d and any(d <= i < e and n.startswith(o.name + '.') for i, n in entries): move.setdefault(d, []).append(o.name)
    moved = {single[n] for ns in move.values() for n in ns}
    new = []
    for i, c in enumerate(cells):
        if i in moved: continue
        new.append(c)
        if i not in exports: continue
        for o in defs(c):
            nm = showdoc_nm(o)
            if nm in move.get(i, ()): new.append(cells[single[nm]])
            elif nm not in explicit:
                sd = mk_cell(f'show_doc({nm})')
                sd.has_sd = True
                sd.metadata['fq_after'] = c.metadata.get('fq_cell')
                new.append(sd)
    nb.cells[:] = new
    nb.has_docs_ = bool(explicit) or bool(exports)

def _first_line(src:str) -> str:
    "The first line of a cell's code, directives skipped."
    return next((l.strip() for l in src.splitlines() if l.strip() and not _DIRECTIVE.match(l)), '')

class CellError(Exception):
    "A notebook cell raised while building the docs."
    def __init__(self, cell, exc):
        self.cell_no, self.after = cell.metadata.get('fq_cell'), cell.metadata.get('fq_after')
        self.first = _first_line(cell.source)
        self.exc = exc
        super().__init__(self.where() + f": {type(exc).__name__}: {exc}")
    def where(self) -> str:
        if self.cell_no: return f"cell {self.cell_no} (`{self.first[:60]}`)"
        if self.after: return f"automatic `{self.first[:60]}` after cell {self.after}"
        return f"`{self.first[:60]}`"

def _patch_nbdev(execute:bool, nb_dir:Path, status:Path=None):
    """Patch nbdev in this (worker) process: the show_doc renderer, `add_show_docs`, and `exec_show_docs`, which
    with `execute` runs every code cell like `nbdev_test` in the notebook's folder; without it, only what show_doc
    needs (exported cells, show_doc cells, and just the imports of cells mixing imports with other code)."""
    import nbdev.processors as P, nbdev.showdoc as S
    from execnb.shell import CaptureShell
    S.BasicMarkdownRenderer._repr_markdown_ = _showdoc_markdown
    P.add_show_docs.begin = _add_show_docs_begin
    flags = skip_flags()
    def begin(self):
        if P.nb_lang(self.nb) != 'python': return
        fm = getattr(self.nb, 'frontmatter_', {})
        self.run_all = execute and not P.str2bool(fm.get('skip_exec', False))
        self.k = CaptureShell()
        if self.run_all: self.k.set_path(nb_dir)
        self.k.run_cell('from nbdev.showdoc import show_doc')
    def run(self, cell, code=None):
        if status is not None: status.write_text(json.dumps(dict(cell=cell.metadata.get('fq_cell'), first=_first_line(cell.source)[:80])))
        if code is None:
            if self.run_all: cell.outputs = []   # no stale saved output next to a fresh one
            self.k.cell(cell)
        else: self.k.run_cell(code)
        if self.k.exc: raise CellError(cell, self.k.exc)
    def call(self, cell):
        if not hasattr(self, 'k') or cell.cell_type != 'code' or not cell.source: return
        fm = getattr(self.nb, 'frontmatter_', {})
        d = cell.directives_
        if d.get('eval:', [''])[0].lower() == 'false' or set(d) & flags: return
        if self.run_all:
            if 'nbdev_export' + '(' in cell.source: return
            return run(self, cell)
        if not self.nb.has_docs_ or P.str2bool(fm.get('skip_showdoc', False)): return
        trees = cell.parsed_() if P.cell_lang(cell) == 'python' else None
        exported = set(d) & {'export', 'exports', 'exporti', 'exec_doc'}
        if trees and not exported and not P._show_docs(trees) and P._ast_contains(trees, (ast.Import, ast.ImportFrom)):
            imps = [n for n in trees if isinstance(n, (ast.Import, ast.ImportFrom))]
            if len(imps) < len(trees): return run(self, cell, '\n'.join(ast.unparse(n) for n in imps))
        if P._do_eval(cell): run(self, cell)
    P.exec_show_docs.begin, P.exec_show_docs.__call__ = begin, call

def _worker(src:Path, dst:Path, execute:bool, result:Path):
    "Process (and run) one notebook into `dst`; write {'ok', 'error', 'where', 'traceback'} to `result`."
    import warnings, traceback
    warnings.filterwarnings('ignore', message='Found cells containing imports')
    if str(ROOT) not in sys.path: sys.path.insert(0, str(ROOT))
    os.environ['IN_TEST'] = '1'
    status = result.with_suffix('.status')
    try:
        os.chdir(src.parent)   # where the notebook's relative paths point, as in nbdev_test
        _patch_nbdev(execute, src.parent, status)
        from execnb.nbio import read_nb, write_nb
        from nbdev.processors import FilterDefaults
        nb = read_nb(src)
        for i, c in enumerate(nb.cells): c.setdefault('metadata', {})['fq_cell'] = i + 1
        FilterDefaults()(nb)
        for c in nb.cells:  # transient attributes of the processors
            for k in [k for k in c if k.endswith('_')]: c.pop(k)
        write_nb(nb, dst)
        res = dict(ok=True)
    except CellError as e:
        tb = ''.join(traceback.format_exception(e.exc))
        res = dict(ok=False, where=e.where(), error=f"{type(e.exc).__name__}: {e.exc}", traceback=tb)
    except Exception as e:
        res = dict(ok=False, where='processing', error=f"{type(e).__name__}: {e}", traceback=traceback.format_exc())
    result.write_text(json.dumps(res))

# ---------------------------------------------------------------- 1c. running the workers, with a cache
def _hash_path(h, p:Path, limit:int=20_000_000):
    "Feed file `p`, or every file under folder `p`, into hash `h` (content up to `limit` bytes each, else size and mtime)."
    skip = lambda x: '__pycache__' in x.parts or any(s.startswith('.') for s in x.relative_to(p).parts)
    for f in ([p] if p.is_file() else sorted(x for x in p.rglob('*') if x.is_file() and not skip(x))):
        h.update(f.relative_to(ROOT).as_posix().encode())
        st = f.stat()
        h.update(f.read_bytes() if st.st_size <= limit else f"{st.st_size}:{st.st_mtime_ns}".encode())

def _referenced_paths(nb_path:Path) -> list:
    "Files and folders of the repository a notebook's code names with a relative path string (`'../benchmarks/results'`)."
    res = set()
    try: cells = json.loads(nb_path.read_text(encoding='utf-8')).get('cells', [])
    except Exception: return []
    for c in cells:
        if c.get('cell_type') != 'code': continue
        for s in re.findall(r'''['"]([\w./-]+)['"]''', ''.join(c.get('source', []))):
            if '/' not in s and '.' not in s: continue
            try: p = (nb_path.parent/s).resolve()
            except (OSError, ValueError): continue
            if nb_path.resolve().is_relative_to(p): continue   # '.', '..': the notebook's own folders
            if p.is_relative_to(ROOT) and p.exists() and p.suffix != '.ipynb' and not p.is_relative_to(ROOT/'.git'):
                res.add(p)
    return sorted(res)

def _common_key(execute:bool) -> str:
    "What every notebook's result depends on: the package sources, settings.ini, the worker code of this script, the tool versions."
    from importlib.metadata import version, PackageNotFoundError
    h = hashlib.sha256()
    h.update(f"v2 execute={execute} flags={sorted(skip_flags())} {sys.version}".encode())
    for pkg in ('nbdev', 'execnb', 'fastcore', 'fastai', 'torch', 'ipython', 'matplotlib'):
        try: h.update(f"{pkg}={version(pkg)}".encode())
        except PackageNotFoundError: pass
    _hash_path(h, ROOT/_settings().get('lib_path', 'fasterquant'))
    _hash_path(h, ROOT/'settings.ini')
    me = Path(__file__).resolve().read_text(encoding='utf-8')  # the part of this script that runs in the workers (1a, 1b)
    h.update(me[me.index('# ' + '-' * 64 + ' 1a.'):me.index('# ' + '-' * 64 + ' 1c.')].encode())
    return h.hexdigest()

def _nb_key(common:str, nb:Path) -> str:
    h = hashlib.sha256(common.encode())
    _hash_path(h, nb)
    for p in _referenced_paths(nb): _hash_path(h, p)
    return h.hexdigest()[:24]

def _cache_file(rel:Path, execute:bool, key:str) -> Path:
    return CACHE/f"{rel.as_posix().replace('/', '__')}.{'exec' if execute else 'docs'}.{key}.ipynb"

def _fmt_s(s:float) -> str: return f"{s:.0f}s" if s >= 10 else f"{s:.1f}s"

def run_proc(n_workers:int=2, execute:bool=True, timeout:float=900, cache:bool=True, refresh:bool=False, quiet:bool=False) -> dict:
    """nbdev's notebook processing of `nbs/` into `_proc/` (`nbdev_proc_nbs` minus its Quarto install), running each
    notebook's cells with `execute`: one fresh process per notebook, `n_workers` at a time, each killed after
    `timeout` seconds. Results are cached (`cache`); `refresh` runs every notebook but still caches the results.
    Exits with one line per failed notebook (notebook, cell, error)."""
    if str(ROOT) not in sys.path: sys.path.insert(0, str(ROOT))
    os.chdir(ROOT)
    nbs = ROOT/_settings().get('nbs_path', 'nbs')
    if PROC.exists(): shutil.rmtree(PROC)
    todo = []
    for f in sorted(nbs.rglob('*')):
        rel = f.relative_to(nbs)
        if not f.is_file() or any(s.startswith(('.', '_')) for s in rel.parts[:-1]) or rel.name.startswith('.'): continue
        if f.suffix == '.ipynb' and rel.name.startswith('_'): continue
        (PROC/rel).parent.mkdir(parents=True, exist_ok=True)
        if f.suffix == '.ipynb': todo.append((f, rel))
        else: shutil.copy2(f, PROC/rel)  # images and other files the notebooks refer to
    common = _common_key(execute) if cache else None
    jobs, hits, t0 = [], [], time.time()
    for f, rel in todo:
        key = _nb_key(common, f) if cache else None
        cf = _cache_file(rel, execute, key) if cache else None
        if cf is not None and cf.exists() and not refresh: shutil.copy2(cf, PROC/rel); hits.append(rel)
        else: jobs.append((f, rel, cf))
    if cache: CACHE.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix='fq-docs-'))
    threads = str(max(1, (os.cpu_count() or 1) // max(1, min(n_workers, len(jobs) or 1))))
    env = {**os.environ, 'IN_TEST': '1', 'OMP_NUM_THREADS': os.environ.get('OMP_NUM_THREADS', threads),
           'MKL_NUM_THREADS': os.environ.get('MKL_NUM_THREADS', threads), 'PYTHONPATH': os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get('PYTHONPATH')] if p]),
           'MPLBACKEND': 'agg', 'PYDEVD_DISABLE_FILE_VALIDATION': '1'}
    if not quiet:
        what = 'running' if execute else 'processing (show_doc only)'
        print(f"docs: {what} {len(jobs)} notebook(s) with {n_workers} worker(s), {len(hits)} from the cache", flush=True)
    pending, running, done, errs, times = list(jobs), {}, [], [], {}
    try:
        while pending or running:
            while pending and len(running) < max(1, n_workers):
                f, rel, cf = pending.pop(0)
                res = work/(rel.as_posix().replace('/', '__') + '.json')
                log = open(res.with_suffix('.log'), 'w')
                cmd = [sys.executable, str(Path(__file__).resolve()), '--worker', str(f), str(PROC/rel), '1' if execute else '0', str(res)]
                p = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
                running[p] = (f, rel, cf, res, log, time.time())
            time.sleep(0.2)
            for p, (f, rel, cf, res, log, start) in list(running.items()):
                el = time.time() - start
                if p.poll() is None and el < timeout: continue
                if p.poll() is None:  # past the timeout: kill the notebook's process group
                    try: os.killpg(p.pid, 9)
                    except ProcessLookupError: pass
                    p.wait()
                log.close(); del running[p]; times[rel] = el
                src_rel = f.relative_to(ROOT).as_posix()
                r = json.loads(res.read_text()) if res.exists() else None
                if r is None:
                    st = res.with_suffix('.status')
                    where = ''
                    if st.exists():
                        s = json.loads(st.read_text())
                        where = f" in cell {s.get('cell')} (`{(s.get('first') or '')[:60]}`)"
                    why = f"timed out after {timeout:.0f}s{where}" if el >= timeout else f"worker died (exit status {p.returncode}){where}"
                    tail = res.with_suffix('.log').read_text(errors='replace')[-3000:]
                    errs.append((src_rel, why, tail))
                elif not r['ok']:
                    errs.append((src_rel, f"{r['where']}: {r['error'].splitlines()[0] if r['error'] else ''}"[:300], r.get('traceback', '')))
                else:
                    done.append(rel)
                    if cf is not None:
                        for old in CACHE.glob(cf.name.rsplit('.', 2)[0] + '.*.ipynb'): old.unlink()   # earlier results of this notebook
                        shutil.copy2(PROC/rel, cf)
                    if not quiet: print(f"docs:   {_fmt_s(el):>6}  {src_rel}", flush=True)
    finally:
        for p in running:
            try: os.killpg(p.pid, 9)
            except ProcessLookupError: pass
    shutil.rmtree(work, ignore_errors=True)
    if cache:  # results of notebooks that were renamed or removed
        live = {rel.as_posix().replace('/', '__') for _, rel in todo}
        for f in CACHE.glob('*.ipynb'):
            if f.name.rsplit('.', 3)[0] not in live: f.unlink()
    if errs:
        for nb, why, tb in errs:
            print(f"\n---- {nb}: {why}\n{textwrap.indent(tb.rstrip(), '    ')}", file=sys.stderr)
        print('', file=sys.stderr)
        sys.exit('\n'.join(f"docs build failed: {nb}: {why}" for nb, why, _ in errs))
    if not quiet: print(f"docs: {len(done)} notebook(s) {'run' if execute else 'processed'} in {_fmt_s(time.time() - t0)}", flush=True)
    return dict(execute=execute, run=[r.as_posix() for r in done], cached=[r.as_posix() for r in hits], times={k.as_posix(): round(v, 1) for k, v in times.items()})

# ---------------------------------------------------------------- 2. notebook -> Markdown
_DIRECTIVE = re.compile(r'^\s*#\s*\|\s*([\w-]+)\s*:?\s*(.*?)\s*$')
_SD_HEAD = re.compile(r'^(#{1,6}) ([A-Za-z_][\w.]*)[ \t]*$', re.M)
_ANSI = re.compile(r'\x1b(?:[@-Z\\-_]|\[[0-?]*[ -/]*[@-~])')
_PROGRESS_LINE = re.compile(r'^\s*(?:[\w ]*\d+/\d+ : )?\|[█\-]*\|\s*\d+(?:\.\d+)?%|\d+%\|[█▏▎▍▌▋▊▉# ]*\|')
MAX_LINES = 80  # longer text outputs show their first and last lines

def _src(x) -> str: return ''.join(x) if isinstance(x, list) else (x or '')

def _directives(src:str):
    "Split leading `#| key: value` lines off a code cell."
    lines, dirs = src.splitlines(), {}
    while lines and _DIRECTIVE.match(lines[0]):
        k, v = _DIRECTIVE.match(lines[0]).groups()
        dirs[k.lower()] = v.lower()
        lines.pop(0)
    return dirs, '\n'.join(lines).strip('\n')

def _fence(text:str, lang:str='') -> str:
    n = max([3] + [len(m) + 1 for m in re.findall(r'`{3,}', text)])
    return f"{'`' * n}{lang}\n{text.rstrip()}\n{'`' * n}"

def _anchor(name:str) -> str: return name.lower()

def _unlink_code(md:str) -> str:
    "Inside fenced code, the Markdown links nbdev's `link_line` puts on backticked names go back to the backticked names."
    parts = re.split(r'(^(`{3,}|~{3,}).*?^\2[^\n]*$)', md, flags=re.M | re.S)
    out = []
    for i in range(0, len(parts), 3):
        out.append(parts[i])
        if i + 1 < len(parts): out.append(re.sub(r'\[(`[^`\]]+`)\]\([^)\s]+\)', r'\1', parts[i + 1]))
    return ''.join(out)

def _terminal(text:str) -> str:
    "What a terminal shows for `text`: ANSI codes dropped, `\\r` overwrites the line, console progress bars removed."
    lines = []
    for l in _ANSI.sub('', text).split('\n'):
        segs = [s for s in l.split('\r') if s.strip()]
        l = segs[-1] if segs else ''
        if _PROGRESS_LINE.search(l) or l.strip() == '█': continue
        lines.append(l.rstrip())
    return '\n'.join(lines).strip('\n')

def _is_progress_html(html:str) -> bool:
    "fastprogress's notebook bars (each update is one output, the finished bar an empty one) and their <style>."
    h = html.strip()
    return not h or '<progress' in h or bool(re.fullmatch(r'(?s)<style[^>]*>.*?</style>', h))

class Page:
    "One notebook rendered as a Markdown page."
    def __init__(self, nb_path:Path, rel_md:Path):
        self.nb_path, self.rel_md = nb_path, rel_md
        self.nb = json.loads(nb_path.read_text(encoding='utf-8'))
        self.title, self.description, self.anchors, self.n_img, self.module = None, None, [], 0, None
        self.blocks = []   # dicts: kind ('md' gets API links, 'sd' is a show_doc entry, 'raw' is verbatim), text, name, cell, wrap
        self.dropped, self.truncated = [], []

    @property
    def files_dir(self): return self.rel_md.with_name(self.rel_md.stem + '_files')

    def _image(self, data:bytes, ext:str, out_root:Path) -> str:
        self.n_img += 1
        rel = self.files_dir/f"out_{self.n_img}.{ext}"
        (out_root/rel).parent.mkdir(parents=True, exist_ok=True)
        (out_root/rel).write_bytes(data)
        return f"![]({self.files_dir.name}/{rel.name})"

    def _text(self, text:str, cell) -> str:
        lines = text.split('\n')
        if len(lines) > MAX_LINES:
            self.truncated.append((cell, len(lines)))
            k = MAX_LINES * 3 // 4
            lines = lines[:k] + [f"... ({len(lines) - k - 10} more lines) ..."] + lines[-10:]
        return _fence('\n'.join(lines), 'text')

    def _outputs(self, cell, is_sd:bool, out_root:Path) -> list:
        res, n = [], (cell.get('metadata') or {}).get('fq_cell')
        def add(kind, text, cls='', wrap=True, **kw):
            res.append(dict(kind=kind, text=text, cell=n, wrap=f"fq-output {cls}".strip() if wrap else None, **kw))
        outs = cell.get('outputs', [])
        merged = []  # consecutive stream outputs of one name as one
        for o in outs:
            if o.get('output_type') == 'stream' and merged and merged[-1].get('output_type') == 'stream' and merged[-1].get('name') == o.get('name'):
                merged[-1] = {**merged[-1], 'text': _src(merged[-1].get('text')) + _src(o.get('text'))}
            else: merged.append(o)
        for o in merged:
            t = o.get('output_type')
            if t == 'stream':
                txt = _terminal(_src(o.get('text')))
                if txt.strip(): add('raw', self._text(txt, n), 'fq-stderr' if o.get('name') == 'stderr' else 'fq-stream')
                continue
            if t == 'error':
                tb = _ANSI.sub('', '\n'.join(o.get('traceback', [])) or f"{o.get('ename')}: {o.get('evalue')}")
                add('raw', _fence(tb, 'text'), 'fq-error'); continue
            d = o.get('data', {})
            html = _src(d.get('text/html')) if 'text/html' in d else None
            mdo = _src(d['text/markdown']).strip() if 'text/markdown' in d else None
            if html is not None and mdo is not None and mdo.startswith('```html'): mdo = None  # a copy of the HTML, fenced
            if mdo is not None and not (is_sd and not mdo):
                if is_sd: res.extend(self._sd(mdo, n))
                else: add('md', mdo, 'fq-md')
            elif 'image/png' in d: add('raw', self._image(base64.b64decode(_src(d['image/png'])), 'png', out_root), 'fq-image')
            elif 'image/svg+xml' in d: add('raw', self._image(_src(d['image/svg+xml']).encode(), 'svg', out_root), 'fq-image')
            elif html is not None:
                if not _is_progress_html(html): add('html', html.strip(), 'fq-html')
            elif 'text/plain' in d:
                txt = _src(d['text/plain'])
                if not re.fullmatch(r'<[\w.]+ (object|figure|Figure)\b.*>|<Figure size .*>', txt.strip()): add('raw', self._text(txt, n), 'fq-result')
        return res

    def _sd(self, md:str, n) -> list:
        "A `show_doc` entry: its heading gets a stable id (its lower-cased name); nbdev's rule above it is dropped (the CSS draws one)."
        md = re.sub(r'^\s*---\s*\n', '', md)
        src = re.match(r'^(\[source\]\([^)]*\)\{[^}]*\})\s*\n', md)  # nbdev's own format puts the source link first
        if src: md = md[src.end():].lstrip('\n')
        m = _SD_HEAD.search(md)
        if m is None: return [dict(kind='md', text=md, cell=n, wrap=None)]
        name = m.group(2)
        head = f"{m.group(1)} {name} {{ #{_anchor(name)} .fq-api }}"
        rest = md[m.end():]
        if src: rest = '\n\n' + src.group(1).replace('{target=', '{ .fq-source target=').replace(' style="float:right; font-size:smaller"', '') + rest
        return [dict(kind='sd', text=md[:m.start()] + head + rest, cell=n, wrap=None, name=name)]

    def _fix_entries(self):
        "No entry twice on a page (the first one stays), and a class's entry before its methods' entries."
        seen, blocks = set(), []
        for b in self.blocks:
            if b['kind'] == 'sd':
                if b['name'] in seen: self.dropped.append(b['name']); continue
                seen.add(b['name'])
            blocks.append(b)
        for _ in range(len(blocks)):
            idx = {b['name']: i for i, b in enumerate(blocks) if b['kind'] == 'sd'}
            bad = next(((idx[n.rsplit('.', 1)[0]], i) for n, i in sorted(idx.items(), key=lambda kv: kv[1])
                        if '.' in n and idx.get(n.rsplit('.', 1)[0], -1) > i), None)
            if bad is None: break
            j, i = bad
            blocks.insert(i, blocks.pop(j))
        self.blocks = blocks
        self.anchors = [b['name'] for b in blocks if b['kind'] == 'sd']

    def convert(self, out_root:Path):
        import yaml
        for cell in self.nb.get('cells', []):
            ct, src = cell.get('cell_type'), _src(cell.get('source'))
            if ct == 'raw':
                m = re.match(r'^\s*---\s*\n(.*?)\n---\s*$', src, re.S)
                if m and self.title is None:
                    fm = yaml.safe_load(m.group(1)) or {}
                    self.title, self.description = fm.get('title'), fm.get('description')
                continue
            if ct == 'markdown':
                src = re.sub(r'<!-- WARNING: THIS FILE WAS AUTOGENERATED!.*?-->', '', src).strip()
                if src: self.blocks.append(dict(kind='md', text=src, cell=None, wrap=None))
                continue
            if ct != 'code': continue
            dirs, code = _directives(src)
            if dirs.get('include') == 'false': continue
            is_sd = bool(re.match(r'^\s*show_doc\(', code))
            if code and dirs.get('echo') != 'false' and not is_sd: self.blocks.append(dict(kind='raw', text=_fence(code, 'python'), cell=None, wrap=None))
            if dirs.get('output') != 'false': self.blocks.extend(self._outputs(cell, is_sd, out_root))
        self._fix_entries()
        if self.title is None:
            h = next((b['text'] for b in self.blocks if b['kind'] == 'md' and b['text'].startswith('# ')), None)
            self.title = h[2:].splitlines()[0].strip() if h else self.rel_md.stem.replace('_', ' ').title()

    def markdown(self, api:dict) -> str:
        "The page: front matter, title, description as a lead paragraph, then the blocks with API names linked."
        head = ['---', f"title: {json.dumps(self.title)}"]
        if self.description: head.append(f"description: {json.dumps(' '.join(str(self.description).split()))}")
        head += ['---', '', f"# {self.title}", '']
        if self.description: head += [' '.join(str(self.description).split()), '{ .fq-lead }', '']
        head.append('')
        anchors = {(p.as_posix(), a) for p, a in api.values()}
        body = []
        for b in self.blocks:
            t = b['text']
            if b['kind'] in ('md', 'sd'): t = _unlink_code(repo_links(linkify(t, api, self.rel_md), self.nb_path, anchors))
            if b.get('wrap'):
                cell = f' data-cell="{b["cell"]}"' if b.get('cell') else ''
                if b['kind'] == 'html': t = f'<div class="{b["wrap"]}"{cell}>\n{t}\n</div>'
                else: t = f'<div class="{b["wrap"]}"{cell} markdown>\n\n{t}\n\n</div>'
            body.append(t)
        return '\n'.join(head) + '\n\n'.join(body) + '\n'

_CODE = re.compile(r'(?<![\[\w])`([A-Za-z_][\w.]*)(\(\))?`(?!\]|\()')

def linkify(md:str, api:dict, page:Path) -> str:
    "Link backticked API names (`Quantizer`, `Quantizer.set_spec`, `fit_grid()`) to their show_doc entry, outside code blocks."
    parts = re.split(r'(^```.*?^```[^\n]*$)', md, flags=re.M | re.S)
    def f(m):
        tgt = api.get(m.group(1))
        if tgt is None: return m.group(0)
        p, a = tgt
        rel = os.path.relpath(p, page.parent).replace(os.sep, '/') if p != page else ''
        return f"[{m.group(0)}]({rel}#{a})"
    return ''.join(s if i % 2 else _CODE.sub(f, s) for i, s in enumerate(parts))

def _doc_url() -> str:
    s = _settings()
    return f"{s.get('doc_host', '').rstrip('/')}{s.get('doc_baseurl', '')}".rstrip('/') + '/'

_LINK = re.compile(r'(\[[^\]]*\]\()([^)\s#]+)(#[^)\s]*)?(\))')

def repo_links(md:str, nb:Path, anchors=None) -> str:
    "Links to the published docs become relative page links; links to repository files that are not pages (`DIMENSIONAL_DESIGN.md`, `benchmarks/...`) point at GitHub."
    s = _settings()
    base = f"{s.get('git_url', '').rstrip('/')}/blob/{s.get('branch', 'main')}/"
    src_dir = ROOT/s.get('nbs_path', 'nbs')/nb.relative_to(PROC).parent
    site = _doc_url()
    page = Path('index.md') if nb.relative_to(PROC) == Path('index.ipynb') else nb.relative_to(PROC).parent/md_name(nb)
    def f(m):
        t = m.group(2)
        if t.startswith(site) and t.endswith('.html'):  # nbdev's own API links point at the published site: keep them local
            tgt = Path(t[len(site):]).with_suffix('.md')
            if anchors is not None and m.group(3) and (tgt.as_posix(), m.group(3)[1:]) not in anchors:
                return m.group(1)[1:-2]  # no show_doc entry to point at (a private helper): keep the text only
            rel = os.path.relpath(tgt, page.parent).replace(os.sep, '/')
            return f"{m.group(1)}{rel}{m.group(3) or ''}{m.group(4)}"
        if re.match(r'^[a-z][\w+.-]*:', t) or t.startswith('/'): return m.group(0)
        for d in ([src_dir, ROOT] if src_dir == ROOT/s.get('nbs_path', 'nbs') else [src_dir]):
            p = (d/t).resolve()
            if p.exists() and p.is_relative_to(ROOT) and p.suffix != '.ipynb' and not (PROC/p.relative_to(ROOT)).exists() and not p.is_relative_to(PROC):
                if (nb.parent/t).exists(): return m.group(0)  # copied next to the page
                return f"{m.group(1)}{base}{p.relative_to(ROOT).as_posix()}{m.group(3) or ''}{m.group(4)}"
        return m.group(0)
    return _LINK.sub(f, md)

def md_name(nb:Path) -> str:
    "`00_grid.ipynb` -> `grid.md` (the number only orders the navigation), as nbdev names its pages."
    return re.sub(r'^\d+[a-z]?_', '', nb.stem) + '.md'

def default_exp(nb:Path) -> str|None:
    "The module a source notebook exports (its `#| default_exp`, e.g. `core.all`), or None."
    try: cells = json.loads(nb.read_text(encoding='utf-8')).get('cells', [])
    except (OSError, ValueError): return None
    for c in cells:
        if c.get('cell_type') != 'code': continue
        for l in _src(c.get('source')).splitlines():
            m = _DIRECTIVE.match(l)
            if m is None: break
            if m.group(1).lower() == 'default_exp' and m.group(2): return m.group(2).strip()
    return None

def is_all_module(mod:str|None) -> bool:
    "Whether `mod` (a `default_exp` value) is an `all` module, one that only gathers other modules' names."
    return mod is not None and (mod == 'all' or mod.endswith('.all'))

def module_file(mod:str) -> Path|None:
    "The source file of module `mod` of the library (`core.all` or `fasterquant.core.all`), or None."
    lib = _settings().get('lib_name', 'fasterquant')
    rel = mod[len(lib) + 1:] if mod.startswith(lib + '.') else '' if mod == lib else mod
    base = ROOT/_settings().get('lib_path', lib)/rel.replace('.', '/') if rel else ROOT/_settings().get('lib_path', lib)
    for f in ((base.with_suffix('.py'),) if rel else ()) + (base/'__init__.py',):
        if f.exists(): return f
    return None

def star_imports(mod:str) -> list:
    "The modules `mod` star-imports (`from .core.utils import *`), as full names, in source order."
    f = module_file(mod)
    if f is None: return []
    lib = _settings().get('lib_name', 'fasterquant')
    full = mod if mod == lib or mod.startswith(lib + '.') else f"{lib}.{mod}"
    pkg = full.split('.') if f.name == '__init__.py' else full.split('.')[:-1]
    res = []
    for n in ast.parse(f.read_text(encoding='utf-8')).body:
        if isinstance(n, ast.ImportFrom) and any(a.name == '*' for a in n.names):
            base = pkg[:len(pkg) - n.level + 1] if n.level else []
            res.append('.'.join(base + ([n.module] if n.module else [])))
    return res

def exported_names(mod:str, _seen:frozenset=frozenset()) -> list:
    """The names `from mod import *` gives, read from the sources (nothing is imported): the module's `__all__` when it
    is a literal list (what `nbdev_export` writes), else, for an `__all__` gathered from other modules as the `all`
    modules gather it, the names of the modules it star-imports, in order."""
    f = module_file(mod)
    if f is None or mod in _seen: return []
    tree = ast.parse(f.read_text(encoding='utf-8'))
    literal, public = None, []
    for n in tree.body:
        tgt = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == '__all__' for t in tgt):
            try: literal = [str(x) for x in ast.literal_eval(n.value)]
            except (ValueError, TypeError, SyntaxError): literal = None
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not n.name.startswith('_'): public.append(n.name)
    if literal is not None: return literal
    res = []
    for m in star_imports(mod):
        res += [x for x in exported_names(m, _seen | {mod}) if x not in res]
    return res or public

def exports_markdown(mod:str, page:Path, pages_of:dict) -> str:
    """The table of the names `from <lib>.<mod> import *` gives: one row per module they come from (an `all` module
    it star-imports stands for its own modules), linked to that module's page (`pages_of`: module -> page), with the
    module's names in backticks (linked to their entries by `linkify`)."""
    lib = _settings().get('lib_name', 'fasterquant')
    full = mod if mod.startswith(lib + '.') else f"{lib}.{mod}"
    def leaves(m, seen=frozenset()):
        for x in star_imports(m):
            if x in seen: continue
            if star_imports(x) and is_all_module(x): yield from leaves(x, seen | {m})
            else: yield x
    rows, total = [], []
    for m in dict.fromkeys(leaves(full)):
        names = [n for n in exported_names(m) if n not in total]
        total += [n for n in names if n not in total]
        tgt = pages_of.get(m)
        where = f"[`{m}`]({os.path.relpath(tgt, page.parent).replace(os.sep, '/')})" if tgt is not None else f"`{m}`"
        rows.append(f"| {where} | {', '.join(f'`{n}`' for n in names) or '(none)'} |")
    head = f"## Exported names\n\n`from {full} import *` gives these {len(total)} names, from {len(rows)} module(s):\n\n"
    return head + '| Module | Names |\n|---|---|\n' + '\n'.join(rows)

def find_notebooks(root:Path) -> list:
    "Processed notebooks, skipping `_private`/hidden files and folders."
    return sorted(p for p in root.rglob('*.ipynb') if not any(s.startswith(('_', '.')) for s in p.relative_to(root).parts))

def convert_all(proc:Path=PROC, out:Path=MD, quiet:bool=False) -> list:
    "Convert every processed notebook into `out`; return the pages."
    if out.exists(): shutil.rmtree(out)
    out.mkdir(parents=True)
    pages, nbs = [], ROOT/_settings().get('nbs_path', 'nbs')
    lib = _settings().get('lib_name', 'fasterquant')
    for nb in find_notebooks(proc):
        rel = nb.relative_to(proc)
        rel_md = Path('index.md') if rel == Path('index.ipynb') else rel.parent/md_name(nb)
        pg = Page(nb, rel_md); pg.convert(out); pages.append(pg)
        pg.module = default_exp(nbs/rel)
    pages_of = {f"{lib}.{pg.module}" if pg.module != '__init__' else lib: pg.rel_md for pg in pages if pg.module}
    for pg in pages:
        if is_all_module(pg.module): pg.blocks.append(dict(kind='md', text=exports_markdown(pg.module, pg.rel_md, pages_of), cell=None, wrap='fq-exports'))
    api = {}
    for pg in pages:
        for name in pg.anchors: api.setdefault(name, (pg.rel_md, _anchor(name)))
    for pg in pages: (out/pg.rel_md).parent.mkdir(parents=True, exist_ok=True); (out/pg.rel_md).write_text(pg.markdown(api), encoding='utf-8')
    if not any(pg.rel_md == Path('index.md') for pg in pages): (out/'index.md').write_text(default_index(pages), encoding='utf-8')
    for f in (DOCS/'assets').glob('*'): (out/'assets').mkdir(exist_ok=True); shutil.copy2(f, out/'assets'/f.name)
    for f in proc.rglob('*'):  # images and other files the notebooks link to sit next to their pages
        if f.is_file() and f.suffix not in ('.ipynb', '.yml') and not (out/f.relative_to(proc)).exists():
            (out/f.relative_to(proc)).parent.mkdir(parents=True, exist_ok=True); shutil.copy2(f, out/f.relative_to(proc))
    if not quiet:
        for pg in pages:
            if pg.dropped: print(f"docs: {pg.rel_md}: repeated show_doc entries left out: {', '.join(pg.dropped)}")
            for cell, n in pg.truncated: print(f"docs: {pg.rel_md}: the output of cell {cell} has {n} lines, shortened to {MAX_LINES}")
    return pages

def default_index(pages) -> str:
    "A home page when `nbs/index.ipynb` does not exist yet: the description and the sections."
    s = _settings()
    lines = ['---', f"title: {json.dumps(s.get('title', 'fasterquant'))}", '---', '', f"# {s.get('title', 'fasterquant')}", '', s.get('description', ''), '{ .fq-lead }', '']
    for sec, pgs in group(pages):
        lines += [f"## {section_title(sec)}", ''] + [f"- [{p.title}]({p.rel_md.as_posix()})" + (f": {p.description}" if p.description else '') for p in pgs] + ['']
    return '\n'.join(lines)

# ---------------------------------------------------------------- 3. navigation from the folder structure
def group(pages):
    "Pages grouped by top-level folder, in `SECTIONS` order."
    secs = {}
    for p in pages:
        if p.rel_md == Path('index.md'): continue
        secs.setdefault(p.rel_md.parts[0] if len(p.rel_md.parts) > 1 else '', []).append(p)
    return [(k, sorted(v, key=lambda p: p.nb_path.name)) for k, v in sorted(secs.items(), key=lambda kv: section_key(kv[0]))]

def nav(pages) -> list:
    "MkDocs `nav`: Home, then one section per `nbs/` folder (sub-folders nest), pages in notebook-number order."
    res = [{'Home': 'index.md'}]
    for sec, pgs in group(pages):
        if not sec: res += [{p.title: p.rel_md.as_posix()} for p in pgs]; continue
        items = []
        for p in pgs:
            node = items
            for sub in p.rel_md.parts[1:-1]:  # nested folders become nested sections
                nxt = next((d[section_title(sub)] for d in node if section_title(sub) in d and isinstance(d[section_title(sub)], list)), None)
                if nxt is None: nxt = []; node.append({section_title(sub): nxt})
                node = nxt
            node.append({p.title: p.rel_md.as_posix()})
        res.append({section_title(sec): items})
    return res

# ---------------------------------------------------------------- 4. MkDocs
def write_config(pages) -> Path:
    "`_docs/mkdocs.yml`: inherits `docs/mkdocs.yml` and adds the generated nav and the folders."
    import yaml
    cfg = {'INHERIT': os.path.relpath(DOCS/'mkdocs.yml', OUT), 'docs_dir': 'md', 'site_dir': os.path.relpath(SITE, OUT), 'nav': nav(pages)}
    p = OUT/'mkdocs.yml'
    p.write_text(yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True), encoding='utf-8')
    return p

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--no-execute', action='store_true', help="fast build: do not run the notebooks (only show_doc cells, exported cells and imports run; pages show code and API entries, and the outputs saved in the notebooks)")
    ap.add_argument('--execute', action='store_true', help=argparse.SUPPRESS)  # the default now; kept so older commands work
    ap.add_argument('--no-proc', action='store_true', help="reuse _proc/ from a previous run (skip nbdev processing)")
    ap.add_argument('--no-cache', action='store_true', help="run every notebook, ignoring (and refreshing) the results cached in .cache/docs/")
    ap.add_argument('--serve', action='store_true', help="serve the site on localhost after building the Markdown")
    ap.add_argument('--no-strict', action='store_true', help="do not fail on MkDocs warnings (broken links)")
    ap.add_argument('--workers', type=int, default=min(2, os.cpu_count() or 1), help="notebooks processed side by side (default: 2, or 1 on one core)")
    ap.add_argument('--timeout', type=float, default=900, help="seconds one notebook may take (default: 900)")
    a = ap.parse_args(argv)
    execute = not a.no_execute
    t0 = time.time()
    if not a.no_proc:
        info = run_proc(a.workers, execute, a.timeout, refresh=a.no_cache)
    elif INFO.exists(): info = json.loads(INFO.read_text())
    else: info = dict(execute=None)
    pages = convert_all()
    INFO.write_text(json.dumps({**info, 'pages': len(pages)}, indent=1))
    cfg = write_config(pages)
    cmd = [sys.executable, '-m', 'mkdocs', 'serve' if a.serve else 'build', '-f', str(cfg)] + ([] if a.no_strict or a.serve else ['--strict'])
    if not a.serve: cmd += ['--clean', '--quiet']
    print(f"docs: {len(pages)} pages -> {MD.relative_to(ROOT)}; {' '.join(cmd[1:])}", flush=True)
    r = subprocess.run(cmd, cwd=ROOT, env={**os.environ, 'NO_MKDOCS_2_WARNING': '1'})
    if r.returncode: sys.exit(r.returncode)
    if not a.serve: print(f"docs: site {SITE/'index.html'} built in {_fmt_s(time.time() - t0)}")
    return pages

if __name__ == '__main__':
    if sys.argv[1:2] == ['--worker']:  # one notebook, in its own process (see `run_proc`)
        s, d, x, r = sys.argv[2:6]
        _worker(Path(s).resolve(), Path(d).resolve(), x == '1', Path(r).resolve())
    else: main()
