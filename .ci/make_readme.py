#!/usr/bin/env python
"""Render nbs/index.ipynb to README.md (nbdev's `readme_nb`) without Quarto: markdown cells as they are,
code cells as python blocks (cells with `#| hide` left out, directives dropped), saved outputs as text or markdown.
`python .ci/make_readme.py --check` exits 1 if README.md is not up to date."""
import json, sys, re
from pathlib import Path
from nbdev.config import get_config

def _src(c): return c['source'] if isinstance(c['source'], str) else ''.join(c['source'])

def _outputs(c):
    out = []
    for o in c.get('outputs', []):
        data = o.get('data', {})
        if 'text/markdown' in data: out.append(''.join(data['text/markdown']))
        elif o.get('output_type') == 'stream' and o.get('name') == 'stdout': out.append('```\n' + ''.join(o['text']).rstrip() + '\n```')
        elif 'text/plain' in data: out.append('```\n' + ''.join(data['text/plain']).rstrip() + '\n```')
    return out

def render(nb_path) -> str:
    nb = json.loads(Path(nb_path).read_text())
    parts = []
    for c in nb['cells']:
        s = _src(c)
        if c['cell_type'] == 'markdown': parts.append(s); continue
        lines = s.split('\n')
        dirs = [l for l in lines if re.match(r'^\s*#\s*\|', l)]
        if any(re.search(r'\|\s*(hide|include:\s*false)', d) for d in dirs): continue
        echo_false = any(re.search(r'\|\s*echo:\s*false', d) for d in dirs)
        code = '\n'.join(l for l in lines if l not in dirs).strip()
        if code and not echo_false: parts.append('```python\n' + code + '\n```')
        parts += _outputs(c)
    return '\n\n'.join(p.strip() for p in parts if p.strip()) + '\n'

if __name__ == '__main__':
    cfg = get_config()
    md = render(cfg.nbs_path/cfg.readme_nb)
    readme = cfg.config_path/'README.md'
    if '--check' in sys.argv:
        ok = readme.exists() and readme.read_text() == md
        if not ok: print("README.md is out of date: run `python .ci/make_readme.py`")
        sys.exit(0 if ok else 1)
    readme.write_text(md)
    print(f"wrote {readme}")
