#!/usr/bin/env python
"""Build the docs site (`python docs/build.py`, notebooks run) and check it; exit status 1, with one line per problem.

    python docs/check_site.py              # build, then check
    python docs/check_site.py --no-build   # check the existing site/

Checks: (1) every notebook of nbs/ has a page, linked from the navigation, and the page of an `all` module
(`#| default_exp core.all`, ...) lists every name that module exports (its `__all__`, imported); (2) every public
function and class (in its module's `__all__`, defined there per `_modidx.py`) has a `show_doc` entry; (3) the site
was built with the notebooks run, every page but an `all` module's shows at least one output, and every cell that
prints or displays something (a top-level `print`/`display`, or a last line that is a bare expression) shows an
output on its page; (4) API entries show a clean signature (no `# docment` comments in the code block) and, when
the source documents parameters with comments, a Type | Default | Details table; (5) no Markdown link syntax
(``[`Context`](quantizer.md#context)``) inside code; (6) no entry twice on a page; (7) a class's entry comes before
its methods'; (8) local links and their #anchors resolve; (9) at least `MIN_PICTURE_PAGES` (10) pages show a
picture: an image (a plot) among a cell's outputs, an <img> inside an `fq-output` block.
"""
from __future__ import annotations
import argparse, ast, importlib.util, io, json, re, sys, tokenize
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urldefrag, unquote

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT/'site'
MIN_PICTURE_PAGES = 10   # check (9): pages with at least one plot or image output
sys.path.insert(0, str(ROOT/'docs'))
import build  # noqa: E402  (docs/build.py)

_RAW_LINK = re.compile(r'\[`[^`\]]+`\]\([^)\s]*\)|\]\((?:\.\./)*[\w./-]*\.(?:md|html)(?:#[^)\s]*)?\)')
_COMMENT_CLASSES = {'c', 'c1', 'cm', 'ch', 'cs', 'cp', 'cpf'}  # Pygments comment token classes

class _Page(HTMLParser):
    "What the checks need from one HTML page: links, ids, API entries (in order), outputs, code text."
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.hrefs, self.ids, self.nav, self.entries, self.out_cells, self.raw_links = [], set(), [], [], set(), []
        self.n_outputs = 0
        self.n_pictures = 0         # <img> inside an output block
        self.exports = []           # code texts of the exported-names table of an `all` page (div.fq-exports)
        self._nav = 0
        self._stack = []            # open tags: (tag, attrs)
        self._head = None           # the API heading being read
        self._head_skip = 0         # inside its permalink
        self._code = []             # text of the open <code>/<pre> elements
        self._pre = None            # [text, has comment] of the open <pre>
        self._params = 0            # depth inside div.fq-params
        self._th = None
    def _cls(self, a): return (a.get('class') or '').split()
    def _inside(self, cls): return any(t == 'div' and cls in self._cls(a) for t, a in self._stack)
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag not in ('br', 'img', 'hr', 'input', 'meta', 'link'): self._stack.append((tag, a))
        if 'id' in a: self.ids.add(a['id'])
        cls = self._cls(a)
        if tag == 'img' and self._inside('fq-output'): self.n_pictures += 1
        if tag == 'nav' and 'md-nav--primary' in cls: self._nav = 1
        elif tag == 'nav' and self._nav: self._nav += 1
        if tag == 'a' and a.get('href'):
            self.hrefs.append(a['href'])
            if self._nav: self.nav.append(a['href'])
        if re.fullmatch(r'h[1-6]', tag):
            if 'fq-api' in cls:
                self._head = dict(id=a.get('id'), name='', sig=None, comment=False, table=False, level=tag)
                self.entries.append(self._head)
            elif self.entries and self.entries[-1].get('open', True): self.entries[-1]['open'] = False
        if self._head is not None and tag == 'a' and 'headerlink' in cls: self._head_skip += 1
        if tag == 'div' and 'fq-output' in cls:
            self.n_outputs += 1
            if a.get('data-cell'): self.out_cells.add(int(a['data-cell']))
        if tag == 'div' and ('fq-params' in cls or self._params): self._params += 1
        if tag == 'th' and self._params: self._th = ''
        if tag in ('code', 'pre'): self._code.append('')
        if tag == 'pre': self._pre = ['', False]
        if tag == 'span' and self._pre is not None and set(cls) & _COMMENT_CLASSES: self._pre[1] = True
    def handle_endtag(self, tag):
        while self._stack:
            t, _ = self._stack.pop()
            if t == tag: break
        if tag == 'nav' and self._nav: self._nav -= 1
        if self._head is not None and tag == 'a' and self._head_skip: self._head_skip -= 1
        elif self._head is not None and tag == self._head['level']:
            self._head['name'] = self._head['name'].strip(); self._head = None
        if tag == 'div' and self._params: self._params -= 1
        if tag == 'th' and self._th is not None:
            if self._th.strip() == 'Details' and self.entries and self.entries[-1].get('open', True): self.entries[-1]['table'] = True
            self._th = None
        if tag in ('code', 'pre') and self._code:
            txt = self._code.pop()
            if self._code: self._code[-1] += txt
            elif _RAW_LINK.search(txt): self.raw_links.append(_RAW_LINK.search(txt).group(0))
            if tag == 'code' and self._inside('fq-exports'): self.exports.append(txt.strip())
        if tag == 'pre' and self._pre is not None:
            e = self.entries[-1] if self.entries else None
            if e is not None and e.get('open', True) and e['sig'] is None: e['sig'], e['comment'] = self._pre
            self._pre = None
    def handle_data(self, data):
        if self._head is not None and not self._head_skip: self._head['name'] += data
        if self._code: self._code[-1] += data
        if self._pre is not None: self._pre[0] += data
        if self._th is not None: self._th += data

def parse(path:Path) -> _Page:
    p = _Page(); p.feed(path.read_text(encoding='utf-8')); return p

# ---------------------------------------------------------------- what the sources say
def _module_file(mod:str) -> Path: return ROOT/(mod.replace('.', '/') + '.py')

def _all_names(path:Path) -> set:
    "The names in a module's `__all__` (read from its source, without importing it)."
    try: tree = ast.parse(path.read_text(encoding='utf-8'))
    except (OSError, SyntaxError): return set()
    names = set()
    for n in tree.body:
        tgt = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, (ast.AugAssign, ast.AnnAssign)) else []
        if any(isinstance(t, ast.Name) and t.id == '__all__' for t in tgt) and n.value is not None:
            try: names |= set(ast.literal_eval(n.value))
            except ValueError: pass
    return names

def _docmented(path:Path) -> set:
    "Top-level functions and classes of a module whose parameters are documented with comments (docments)."
    try:
        src = path.read_text(encoding='utf-8'); tree = ast.parse(src)
        comments = {t.start[0] for t in tokenize.generate_tokens(io.StringIO(src).readline) if t.type == tokenize.COMMENT}
    except (OSError, SyntaxError, tokenize.TokenError): return set()
    def sig_has(f): return f.body and f.body[0].lineno > f.lineno and any(f.lineno <= l < f.body[0].lineno for l in comments)
    res = set()
    for n in tree.body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and sig_has(n): res.add(n.name)
        elif isinstance(n, ast.ClassDef):
            init = next((b for b in n.body if isinstance(b, ast.FunctionDef) and b.name == '__init__'), None)
            dc = any('dataclass' in ast.unparse(d) for d in n.decorator_list)
            if init is not None and sig_has(init): res.add(n.name)
            elif init is None and dc and any(isinstance(b, ast.AnnAssign) and b.lineno in comments for b in n.body): res.add(n.name)
    return res

def public_symbols() -> dict:
    "Module -> {public function/class: doc page} from `_modidx.py` (written by `nbdev_export`), limited to the module's `__all__`."
    lib = build._settings().get('lib_path', 'fasterquant')
    spec = importlib.util.spec_from_file_location('_modidx', ROOT/lib/'_modidx.py')
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
    res = {}
    for mod, syms in m.d['syms'].items():
        pub = _all_names(_module_file(mod))
        res[mod] = {k[len(mod) + 1:]: (v[0] if isinstance(v, tuple) else v) for k, v in syms.items()
                    if '.' not in k[len(mod) + 1:] and k[len(mod) + 1:] in pub}
    return res

def _expects_output(code:str) -> bool:
    "A cell that surely shows something when run: a top-level `print`/`display` call (also in a top-level for/with), or a bare last expression."
    code = '\n'.join(l for l in code.splitlines() if not re.match(r'^\s*[%!]', l))
    try: tree = ast.parse(code)
    except SyntaxError: return False
    if not tree.body: return False
    def prints(body):
        for s in body:
            if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and isinstance(s.value.func, ast.Name) and s.value.func.id in ('print', 'display'): return True
            if isinstance(s, (ast.For, ast.With)) and prints(s.body): return True
        return False
    last = tree.body[-1]
    bare = isinstance(last, ast.Expr) and not isinstance(last.value, (ast.Call, ast.Constant, ast.Await, ast.Yield, ast.YieldFrom)) and not code.rstrip().endswith(';')
    return prints(tree.body) or bare

def cells_with_output(nb:Path) -> list:
    "[(cell number, first line)] of the cells of `nb` that run when the docs are built and surely show an output."
    flags = build.skip_flags()
    d = json.loads(nb.read_text(encoding='utf-8'))
    res = []
    for i, c in enumerate(d.get('cells', []), 1):
        if c.get('cell_type') == 'raw' and re.search(r'^skip_exec:\s*(true|yes)', build._src(c.get('source')), re.M | re.I): return []
        if c.get('cell_type') != 'code': continue
        dirs, code = build._directives(build._src(c.get('source')))
        if dirs.keys() & ({'export', 'exports', 'exporti', 'hide', 'default_exp'} | flags): continue
        if dirs.get('include') == 'false' or dirs.get('output') == 'false' or dirs.get('eval') == 'false': continue
        if 'nbdev_export(' in code or re.match(r'^\s*show_doc\(', code): continue
        if _expects_output(code): res.append((i, next((l for l in code.splitlines() if l.strip()), '')))
    return res

# ---------------------------------------------------------------- the checks
def check(site:Path=SITE) -> list:
    "Problems found in the built site (empty when all is well)."
    errs = []
    if not (site/'index.html').exists(): return [f"{site/'index.html'} does not exist: run python docs/build.py"]
    pages = {p.relative_to(site).as_posix(): parse(p) for p in site.rglob('*.html') if p.name != '404.html'}
    nav = {urldefrag(h)[0] for h in pages['index.html'].nav}
    info = json.loads(build.INFO.read_text()) if build.INFO.exists() else {}
    nbs = ROOT/build._settings().get('nbs_path', 'nbs')
    def page_of(nb): 
        rel = nb.relative_to(nbs)
        return 'index.html' if rel == Path('index.ipynb') else (rel.parent/build.md_name(nb)).with_suffix('.html').as_posix()
    lib = build._settings().get('lib_name', 'fasterquant')
    if str(ROOT) not in sys.path: sys.path.insert(0, str(ROOT))   # to import the `all` modules
    def all_page(nb): return build.is_all_module(build.default_exp(nb))
    # 1. every notebook has a page, linked from the navigation; an `all` module's page lists the names it exports
    for nb in build.source_notebooks(nbs):
        html = page_of(nb)
        if html not in pages: errs.append(f"nbs/{nb.relative_to(nbs)}: no page {html} in the site"); continue
        if html != 'index.html' and html not in nav: errs.append(f"nbs/{nb.relative_to(nbs)}: page {html} is not in the navigation")
        if all_page(nb):
            mod = f"{lib}.{build.default_exp(nb)}"
            try: want = list(importlib.import_module(mod).__all__)
            except Exception as e: errs.append(f"nbs/{nb.relative_to(nbs)}: cannot import {mod} to read its __all__: {type(e).__name__}: {e}"); continue
            shown = set(pages[html].exports)
            miss = [n for n in want if n not in shown]
            if not shown: errs.append(f"nbs/{nb.relative_to(nbs)}: page {html} does not list the {len(want)} names {mod} exports (the exported-names table of docs/build.py)")
            elif miss: errs.append(f"nbs/{nb.relative_to(nbs)}: page {html} does not list {len(miss)} of the names {mod} exports: {', '.join(miss[:10])}{' ...' if len(miss) > 10 else ''}")
    # 2. every public function/class has a show_doc entry
    where = {}
    for name, pg in pages.items():
        for e in pg.entries: where.setdefault(e['name'], name)
    docm = {}
    for mod, names in public_symbols().items():
        docm[mod] = _docmented(_module_file(mod))
        for n, doc in names.items():
            if n not in where: errs.append(f"{mod}.{n}: no show_doc entry in the site (expected on {urldefrag(doc)[0] or 'its notebook page'})")
    # 3. the notebooks ran; every page but an `all` module's shows an output; cells that print or display show one
    # 9. enough pages show a picture
    if info.get('execute') is False: errs.append("the site was built with --no-execute: build it with `python docs/build.py` to check the outputs")
    else:
        for nb in build.source_notebooks(nbs):
            pg = pages.get(page_of(nb))
            if pg is None: continue
            want = cells_with_output(nb)
            miss = [(i, l) for i, l in want if i not in pg.out_cells]
            if want and not pg.n_outputs: errs.append(f"nbs/{nb.relative_to(nbs)}: its page {page_of(nb)} shows no output at all, though {len(want)} cell(s) print or display")
            elif not pg.n_outputs and not all_page(nb): errs.append(f"nbs/{nb.relative_to(nbs)}: its page {page_of(nb)} shows no output at all: show what it documents (a cell ending with a bare expression, a print or a plot, after each show_doc)")
            else:
                for i, l in miss: errs.append(f"nbs/{nb.relative_to(nbs)}: cell {i} (`{l.strip()[:60]}`) prints or displays, but {page_of(nb)} shows no output for it")
        pics = sorted(name for name, pg in pages.items() if pg.n_pictures)
        if len(pics) < MIN_PICTURE_PAGES:
            errs.append(f"only {len(pics)} page(s) show a picture (a plot or image among a cell's outputs), at least {MIN_PICTURE_PAGES} should: {', '.join(pics) or 'none'}")
    lookup = {n: mod for mod, ns in public_symbols().items() for n in ns}
    for name, pg in pages.items():
        names = [e['name'] for e in pg.entries]
        # 4. signatures without comments, parameter tables
        for e in pg.entries:
            if e['sig'] is None: errs.append(f"{name}: entry {e['name']} has no signature code block")
            elif e['comment']: errs.append(f"{name}: entry {e['name']}: its signature has `# ...` comments: parameter docs belong in a table")
            mod = lookup.get(e['name'])
            if mod and e['name'] in docm.get(mod, ()) and not e['table']: errs.append(f"{name}: entry {e['name']}: its parameters are documented in the source but no Type | Default | Details table is shown")
        # 5. raw Markdown links inside code
        for l in pg.raw_links: errs.append(f"{name}: Markdown link syntax inside code: {l[:80]}")
        # 6. no entry twice
        for n in sorted({n for n in names if names.count(n) > 1}): errs.append(f"{name}: entry {n} appears {names.count(n)} times")
        # 7. a class before its methods
        for i, n in enumerate(names):
            cls = n.rsplit('.', 1)[0] if '.' in n else None
            if cls in names and names.index(cls) > i: errs.append(f"{name}: entry {n} comes before its class's entry {cls}")
    # 8. local links resolve (files and #anchors)
    for name, pg in pages.items():
        for h in pg.hrefs:
            if re.match(r'^[a-z][\w+.-]*:', h) or h.startswith('//'): continue
            url, frag = urldefrag(h)
            tgt = (site/name).parent/unquote(url) if url else site/name
            tgt = Path(str(tgt.resolve()))
            if tgt.is_dir(): tgt = tgt/'index.html'
            if not tgt.exists(): errs.append(f"{name}: broken link {h}"); continue
            if frag and tgt.suffix == '.html':
                t = pages.get(tgt.relative_to(site.resolve()).as_posix()) if tgt.is_relative_to(site.resolve()) else None
                if t is not None and unquote(frag) not in t.ids: errs.append(f"{name}: link {h} points at a missing anchor")
    return errs

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--no-build', action='store_true', help="check the existing site/ without building it")
    a, rest = ap.parse_known_args(argv)
    if not a.no_build: build.main(rest)   # other options (--workers, --timeout, --no-cache) go to build.py
    errs = check()
    for e in errs: print(f"docs check: {e}", file=sys.stderr)
    n = len(list(SITE.rglob('*.html')))
    print(f"docs check: {n} HTML pages, {'OK' if not errs else f'{len(errs)} problem(s)'}")
    return 1 if errs else 0

if __name__ == '__main__': sys.exit(main())
