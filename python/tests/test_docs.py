"""docs/python.md's ```python blocks run, in order, in one namespace (from the repository root)."""

from __future__ import annotations

import os
import re

from conftest import ROOT


def test_docs_python_examples_run(capsys):
    text = (ROOT / "docs" / "python.md").read_text()
    blocks = re.findall(r"^```python\n(.*?)^```", text, re.M | re.S)
    assert len(blocks) >= 6
    env: dict = {"__name__": "docs_python"}
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        for k, code in enumerate(blocks):
            exec(compile(code, f"docs/python.md block {k + 1}", "exec"), env)
    finally:
        os.chdir(cwd)
    out = capsys.readouterr().out
    assert "user g.txt:2:" in out and "bias_gelu" in out
