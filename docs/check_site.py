#!/usr/bin/env python
"""Build the docs site and check it: every notebook has a page linked from the navigation, every public function and
class of the library has its `show_doc` entry on a page, every API page shows its API, and no local link is broken.

    python docs/check_site.py              # build (python docs/build.py), then check; exit status 1 on a problem
    python docs/check_site.py --no-build   # check an existing site/
"""
from __future__ import annotations
import argparse, importlib.util, re, sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urldefrag, unquote

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT/'site'
sys.path.insert(0, str(ROOT/'docs'))
import build  # noqa: E402  (docs/build.py)

class _Page(HTMLParser):
    "The hrefs, ids and API headings of one HTML page."
    def __init__(self):
        super().__init__(); self.hrefs, self.ids, self.api, self.nav = [], set(), set(), []
        self._in_nav = 0
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if 'id' in a: self.ids.add(a['id'])
        if tag in ('h2', 'h3', 'h4') and 'fq-api' in (a.get('class') or '').split(): self.api.add(a.get('id'))
        if tag == 'nav' and 'md-nav--primary' in (a.get('class') or ''): self._in_nav = 1
        elif tag == 'nav' and self._in_nav: self._in_nav += 1
        if tag == 'a' and a.get('href'):
            self.hrefs.append(a['href'])
            if self._in_nav: self.nav.append(a['href'])
    def handle_endtag(self, tag):
        if tag == 'nav' and self._in_nav: self._in_nav -= 1

def parse(path:Path) -> _Page:
    p = _Page(); p.feed(path.read_text(encoding='utf-8')); return p

def public_symbols() -> dict:
    "Module -> public top-level functions and classes, from the library's `_modidx.py` (written by `nbdev_export`)."
    spec = importlib.util.spec_from_file_location('_modidx', ROOT/'fasterquant'/'_modidx.py')
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
    res = {}
    for mod, syms in m.d['syms'].items():
        names = [k[len(mod) + 1:] for k in syms]
        res[mod] = sorted(n for n in names if '.' not in n and not n.startswith('_'))
    return res

def check(site:Path=SITE) -> list:
    "Problems found in the built site (empty when all is well)."
    errs = []
    if not (site/'index.html').exists(): return [f"{site/'index.html'} does not exist: run python docs/build.py"]
    pages = {p.relative_to(site).as_posix(): parse(p) for p in site.rglob('*.html') if p.name != '404.html'}
    nav = {urldefrag(h)[0] for h in pages['index.html'].nav}
    # 1. every notebook has a page, linked from the navigation
    nbs = ROOT/'nbs'
    for nb in build.find_notebooks(nbs):
        rel = nb.relative_to(nbs)
        html = 'index.html' if rel == Path('index.ipynb') else (rel.parent/build.md_name(nb)).with_suffix('.html').as_posix()
        if html not in pages: errs.append(f"nbs/{rel}: no page {html} in the site"); continue
        if html != 'index.html' and html not in nav: errs.append(f"nbs/{rel}: page {html} is not in the navigation")
    # 2. every public function/class has a show_doc entry (an `.fq-api` heading), on the page of its notebook
    anchors = {}
    for name, pg in pages.items():
        for a in pg.api: anchors.setdefault(a, name)
    for mod, names in public_symbols().items():
        for n in names:
            if n.lower() not in anchors: errs.append(f"{mod}.{n}: no show_doc entry in the site")
    # 3. local links resolve (files and #anchors)
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
    a = ap.parse_args(argv)
    if not a.no_build: build.main([])
    errs = check()
    for e in errs: print(f"docs check: {e}", file=sys.stderr)
    n = len([p for p in SITE.rglob('*.html')])
    print(f"docs check: {n} HTML pages, {'OK' if not errs else f'{len(errs)} problem(s)'}")
    return 1 if errs else 0

if __name__ == '__main__': sys.exit(main())
