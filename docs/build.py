#!/usr/bin/env python
"""Build the fasterquant docs site from the notebooks, without Quarto.

    python docs/build.py            # nbdev processing -> _proc/, Markdown -> _docs/md/, MkDocs Material -> site/
    python docs/build.py --execute  # run the notebooks first (slow cells skipped), so the pages show their outputs
    python docs/build.py --serve    # the same, then serve it on http://127.0.0.1:8000/fasterquant/ (reloads when _docs/md changes)

Steps: (1) nbdev's own notebook processors (`FilterDefaults`, what `nbdev_proc_nbs` runs, minus its attempt to
install Quarto) execute every `show_doc` (explicit ones and those nbdev adds after exported code) and apply the
notebook directives into `_proc/`, one fresh process per notebook; to keep this fast and side-effect free,
`#|slow` cells are never run and a cell mixing imports with other code gets only its imports run; (2) each processed notebook becomes a Markdown page (`#| echo: false`
hides code, `#| output: asis` inlines markdown output, images are written next to the page, backticked API
names are linked to their `show_doc` entry); (3) the navigation is generated from the folder structure of
`nbs/`, so new notebooks appear without editing any config; (4) `mkdocs build` with Material renders `site/`.
All outputs (`_proc/`, `_docs/`, `site/`) are git-ignored.
"""
from __future__ import annotations
import argparse, base64, json, os, re, shutil, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT/'docs'
PROC, OUT, SITE = ROOT/'_proc', ROOT/'_docs', ROOT/'site'
MD = OUT/'md'

# Navigation order of the `nbs/<area>/` folders; any other folder follows, alphabetically.
SECTIONS = {'quantize': 'Quantize', 'onnx': 'ONNX', 'sensitivity': 'Sensitivity', 'callbacks': 'Callbacks',
            'tutorials': 'Tutorials', 'data': 'Data', 'core': 'Core', 'cli': 'CLI'}

def section_title(name:str) -> str: return SECTIONS.get(name, name.replace('_', ' ').title())

def section_key(name:str): return (list(SECTIONS).index(name), '') if name in SECTIONS else (len(SECTIONS), name)

# ---------------------------------------------------------------- 1. nbdev processing
def _docs_eval():
    """nbdev's `exec_show_docs`, with two changes so that building the docs never runs a notebook's heavy code:
    cells flagged with a `tst_flags` directive (`#|slow`) are not executed, and a cell mixing imports with other
    code (nbdev warns about these and runs them whole) gets only its import statements executed."""
    import ast
    import nbdev.processors as P
    from nbdev.config import get_config
    flags = set(get_config().get('tst_flags', '').split())
    def call(self, cell):
        if not self.nb.has_docs_ or not hasattr(self, 'k'): return
        fm = getattr(self.nb, 'frontmatter_', {})
        if P.str2bool(fm.get('skip_showdoc', False)): return
        if cell.cell_type != 'code' or set(cell.directives_) & flags: return
        if cell.directives_.get('eval:', [''])[0].lower() == 'false': return
        trees = cell.parsed_() if P.cell_lang(cell) == 'python' and cell.source else None
        exported = set(cell.directives_) & {'export', 'exports', 'exporti', 'exec_doc'}
        if trees and not exported and not P._show_docs(trees) and P._ast_contains(trees, (ast.Import, ast.ImportFrom)):
            imps = [n for n in trees if isinstance(n, (ast.Import, ast.ImportFrom))]
            if len(imps) < len(trees):  # imports mixed with other code: run the imports only
                self.k.run_cell('\n'.join(ast.unparse(n) for n in imps))
                if self.k.exc: raise Exception(f"Error in notebook {fm.get('title', '')} in the imports of cell {cell.idx_}:\n{cell.source}") from self.k.exc
                return
        if P._do_eval(cell): self.k.cell(cell)
        if self.k.exc: raise Exception(f"Error in notebook {fm.get('title', '')} in cell {cell.idx_}:\n{cell.source}") from self.k.exc
    P.exec_show_docs.__call__ = call

def _execute(src:Path, dst:Path):
    "Run `src` like `nbdev_test` (cells flagged with `tst_flags` skipped) and save it with its outputs to `dst`."
    from nbdev.process import NBProcessor
    from nbdev.config import get_config
    from execnb.shell import CaptureShell
    from execnb.nbio import write_nb
    from fastcore.xtras import working_directory
    flags = set(get_config().get('tst_flags', '').split())
    nb = NBProcessor(src, procs=[], rm_directives=False, process=True).nb
    def no_eval(cell):
        if cell.cell_type != 'code' or 'nbdev_export' + '(' in cell.source: return True
        d = getattr(cell, 'directives_', {}) or {}
        return d.get('eval:', [''])[0].lower() == 'false' or bool(flags & d.keys())
    k = CaptureShell(src)
    with working_directory(src.parent): k.run_all(nb, exc_stop=True, preproc=no_eval)
    write_nb(nb, dst)

def _proc_one(o):
    "Process one notebook (in a fresh spawned process, as `nbdev_proc_nbs` does)."
    if str(ROOT) not in sys.path: sys.path.insert(0, str(ROOT))
    os.chdir(ROOT)
    import warnings; warnings.filterwarnings('ignore', message='Found cells containing imports')
    _docs_eval()
    from nbdev.serve_drv import exec_nb
    src, dst, execute = o
    os.environ['IN_TEST'] = '1'
    try:
        if execute: _execute(src, dst); src = dst
        exec_nb(src, dst, __import__('nbdev.processors', fromlist=['FilterDefaults']).FilterDefaults)
    except Exception as e:
        cause = f"\n  caused by {e.__cause__!r}" if e.__cause__ is not None else ''
        return f"{src.relative_to(ROOT)}: {e}{cause}"[:4000]

def run_proc(n_workers:int=2, execute:bool=False):
    "nbdev's notebook processing (`nbdev_proc_nbs` minus its Quarto install) of `nbs/` into `_proc/`: show_doc rendered, directives kept for step 2."
    import multiprocessing
    if str(ROOT) not in sys.path: sys.path.insert(0, str(ROOT))  # the library imports from the repo root, installed or not
    os.chdir(ROOT)
    from nbdev.config import get_config
    nbs = get_config().nbs_path
    if PROC.exists(): shutil.rmtree(PROC)
    todo = []
    for f in sorted(nbs.rglob('*')):
        rel = f.relative_to(nbs)
        if not f.is_file() or any(s.startswith(('.', '_')) for s in rel.parts[:-1]) or rel.name.startswith('.'): continue
        if f.suffix == '.ipynb' and rel.name.startswith('_'): continue
        (PROC/rel).parent.mkdir(parents=True, exist_ok=True)
        if f.suffix == '.ipynb': todo.append((f, PROC/rel, execute))
        else: shutil.copy2(f, PROC/rel)  # images and other files the notebooks refer to
    ctx = multiprocessing.get_context('spawn')  # a fresh interpreter per notebook: no state shared between notebooks
    with ctx.Pool(max(1, n_workers), maxtasksperchild=1) as pool: errs = [e for e in pool.map(_proc_one, todo, chunksize=1) if e]
    if errs: sys.exit("nbdev processing failed:\n" + '\n'.join(errs))

# ---------------------------------------------------------------- 2. notebook -> Markdown
_DIRECTIVE = re.compile(r'^\s*#\s*\|\s*([\w-]+)\s*:?\s*(.*?)\s*$')
_SD_HEAD = re.compile(r'^(#{2,4}) ([A-Za-z_][\w.]*)\s*$', re.M)

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

class Page:
    "One notebook rendered as a Markdown page."
    def __init__(self, nb_path:Path, rel_md:Path):
        self.nb_path, self.rel_md = nb_path, rel_md
        self.nb = json.loads(nb_path.read_text(encoding='utf-8'))
        self.title, self.description, self.anchors, self.n_img = None, None, [], 0
        self.blocks = []  # (kind, text): kind 'md' blocks get API links, others are verbatim

    @property
    def files_dir(self): return self.rel_md.with_name(self.rel_md.stem + '_files')

    def _image(self, data:bytes, ext:str, out_root:Path) -> str:
        self.n_img += 1
        rel = self.files_dir/f"out_{self.n_img}.{ext}"
        (out_root/rel).parent.mkdir(parents=True, exist_ok=True)
        (out_root/rel).write_bytes(data)
        return f"![]({self.files_dir.name}/{rel.name})"

    def _outputs(self, cell, is_sd:bool, out_root:Path) -> list:
        res = []
        for o in cell.get('outputs', []):
            t = o.get('output_type')
            if t == 'stream': res.append(('raw', '<div class="fq-output" markdown>\n\n' + _fence(_src(o.get('text')), 'text') + '\n\n</div>')); continue
            if t == 'error':
                tb = re.sub(r'\x1b\[[0-9;]*m', '', '\n'.join(o.get('traceback', [])) or f"{o.get('ename')}: {o.get('evalue')}")
                res.append(('raw', '<div class="fq-output fq-error" markdown>\n\n' + _fence(tb, 'text') + '\n\n</div>')); continue
            d = o.get('data', {})
            if 'text/markdown' in d:
                md = _src(d['text/markdown']).strip()
                if is_sd: md = self._sd(md)
                res.append(('sd' if is_sd else 'md', md))
            elif 'image/png' in d: res.append(('raw', self._image(base64.b64decode(_src(d['image/png'])), 'png', out_root)))
            elif 'image/svg+xml' in d: res.append(('raw', self._image(_src(d['image/svg+xml']).encode(), 'svg', out_root)))
            elif 'text/html' in d: res.append(('raw', '<div class="fq-html">\n' + _src(d['text/html']).strip() + '\n</div>'))
            elif 'text/plain' in d: res.append(('raw', '<div class="fq-output" markdown>\n\n' + _fence(_src(d['text/plain']), 'text') + '\n\n</div>'))
        return res

    def _sd(self, md:str) -> str:
        "Give a `show_doc` heading a stable id (its lower-cased name) and remember it for API links."
        def f(m):
            self.anchors.append(m.group(2))
            return f"{m.group(1)} {m.group(2)} {{ #{_anchor(m.group(2))} .fq-api }}"
        md = re.sub(r'^---\s*\n', '', md)  # the rule above each entry: the CSS draws one
        return _SD_HEAD.sub(f, md, count=1)

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
                if src: self.blocks.append(('md', src))
                continue
            if ct != 'code': continue
            dirs, code = _directives(src)
            if dirs.get('include') == 'false': continue
            is_sd = bool(re.match(r'^\s*show_doc\(', code))
            if code and dirs.get('echo') != 'false' and not is_sd: self.blocks.append(('raw', _fence(code, 'python')))
            if dirs.get('output') != 'false': self.blocks.extend(self._outputs(cell, is_sd, out_root))
        if self.title is None:
            h = next((b for k, b in self.blocks if k == 'md' and b.startswith('# ')), None)
            self.title = h[2:].splitlines()[0].strip() if h else self.rel_md.stem.replace('_', ' ').title()

    def markdown(self, api:dict) -> str:
        "The page: front matter, title, description as a lead paragraph, then the blocks with API names linked."
        head = ['---', f"title: {json.dumps(self.title)}"]
        if self.description: head.append(f"description: {json.dumps(' '.join(str(self.description).split()))}")
        head += ['---', '', f"# {self.title}", '']
        if self.description: head += [' '.join(str(self.description).split()), '{ .fq-lead }', '']
        head.append('')
        anchors = {(p.as_posix(), a) for p, a in api.values()}
        body = [repo_links(linkify(b, api, self.rel_md), self.nb_path, anchors) if k in ('md', 'sd') else b for k, b in self.blocks]
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

def find_notebooks(root:Path) -> list:
    "Processed notebooks, skipping `_private`/hidden files and folders."
    return sorted(p for p in root.rglob('*.ipynb') if not any(s.startswith(('_', '.')) for s in p.relative_to(root).parts))

def convert_all(proc:Path=PROC, out:Path=MD) -> list:
    "Convert every processed notebook into `out`; return the pages."
    if out.exists(): shutil.rmtree(out)
    out.mkdir(parents=True)
    pages = []
    for nb in find_notebooks(proc):
        rel = nb.relative_to(proc)
        rel_md = Path('index.md') if rel == Path('index.ipynb') else rel.parent/md_name(nb)
        pg = Page(nb, rel_md); pg.convert(out); pages.append(pg)
    api = {}
    for pg in pages:
        for name in pg.anchors: api.setdefault(name, (pg.rel_md, _anchor(name)))
    for pg in pages: (out/pg.rel_md).parent.mkdir(parents=True, exist_ok=True); (out/pg.rel_md).write_text(pg.markdown(api), encoding='utf-8')
    if not any(pg.rel_md == Path('index.md') for pg in pages): (out/'index.md').write_text(default_index(pages), encoding='utf-8')
    for f in (DOCS/'assets').glob('*'): (out/'assets').mkdir(exist_ok=True); shutil.copy2(f, out/'assets'/f.name)
    for f in proc.rglob('*'):  # images and other files the notebooks link to sit next to their pages
        if f.is_file() and f.suffix not in ('.ipynb', '.yml') and not (out/f.relative_to(proc)).exists():
            (out/f.relative_to(proc)).parent.mkdir(parents=True, exist_ok=True); shutil.copy2(f, out/f.relative_to(proc))
    return pages

def _settings() -> dict:
    import configparser
    c = configparser.ConfigParser(); c.read(ROOT/'settings.ini')
    return dict(c['DEFAULT'])

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
    ap.add_argument('--no-proc', action='store_true', help="reuse _proc/ from a previous run (skip nbdev processing)")
    ap.add_argument('--serve', action='store_true', help="serve the site on localhost after building the Markdown")
    ap.add_argument('--no-strict', action='store_true', help="do not fail on MkDocs warnings (broken links)")
    ap.add_argument('--execute', action='store_true', help="run every notebook first (as nbdev_test does, slow cells skipped) so the pages show the outputs")
    ap.add_argument('--workers', type=int, default=2, help="processes for the nbdev processing")
    a = ap.parse_args(argv)
    if not a.no_proc: run_proc(a.workers, a.execute)
    pages = convert_all()
    cfg = write_config(pages)
    cmd = [sys.executable, '-m', 'mkdocs', 'serve' if a.serve else 'build', '-f', str(cfg)] + ([] if a.no_strict or a.serve else ['--strict'])
    if not a.serve: cmd.append('--clean')
    print(f"{len(pages)} pages -> {MD.relative_to(ROOT)}; {' '.join(cmd[1:])}")
    r = subprocess.run(cmd, cwd=ROOT, env={**os.environ, 'NO_MKDOCS_2_WARNING': '1'})
    if r.returncode: sys.exit(r.returncode)
    if not a.serve: print(f"site: {SITE/'index.html'}")
    return pages

if __name__ == '__main__': main()
