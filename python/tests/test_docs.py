"""docs/python.md's, docs/fuse.md's and the README's ```python blocks run, in order, in one
namespace per page (from the repository root)."""

from __future__ import annotations

import os
import re

from conftest import ROOT


def run_python_blocks(path: str, min_blocks: int) -> dict:
    """Runs the ```python blocks of `path` (from the repository root), in order, in one namespace;
    returns it."""
    blocks = re.findall(r"^```python\n(.*?)^```", (ROOT / path).read_text(), re.M | re.S)
    assert len(blocks) >= min_blocks
    env: dict = {"__name__": path}
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        for k, code in enumerate(blocks):
            exec(compile(code, f"{path} block {k + 1}", "exec"), env)
    finally:
        os.chdir(cwd)
    return env


def test_docs_python_examples_run(capsys):
    run_python_blocks("docs/python.md", 6)
    out = capsys.readouterr().out
    assert "user g.txt:2:" in out and "bias_gelu" in out


def test_fuse_rules_example_runs():
    env = run_python_blocks("docs/fuse.md", 1)
    assert env["loss"].shape == (8,)


def test_readme_python_examples_run():
    """The README's ```python blocks run as a new user pastes them (in order, from the repository root)."""
    env = run_python_blocks("README.md", 2)
    assert env["y"].shape == (8, 4096)


# A line of a nanobind docstring that is only a signature: "name(self, x: int) -> str".
_SIGNATURE = re.compile(r"^\s*(def\s+)?[\w.]*\(.*\)(\s*->\s*.*)?$")


def test_every_public_name_has_a_docstring():
    """help() says what each public function, class, method and property is, not only its signature."""
    import inspect

    import fusejit

    def undocumented(obj) -> bool:
        doc = getattr(obj, "__doc__", None) or ""
        return not [line for line in doc.splitlines() if line.strip() and not _SIGNATURE.match(line)]

    missing = []
    for name in fusejit.__all__:
        obj = getattr(fusejit, name)
        if undocumented(obj):
            missing.append(name)
        if inspect.isclass(obj) and not issubclass(obj, BaseException):
            missing += [f"{name}.{k}" for k, v in vars(obj).items() if not k.startswith("_") and undocumented(v)]
    assert missing == []


def test_dir_lists_the_public_names():
    """dir(fusejit) shows what __all__ does, not the modules the package imports for itself."""
    import fusejit

    names = dir(fusejit)
    assert set(fusejit.__all__) <= set(names)
    assert not {"sys", "atexit", "Any", "Mapping", "Sequence", "annotations", "_fusejit"} & set(names)
    assert "translate" in names and "__version__" in names


def test_help_lists_static_methods_as_methods():
    """help(fusejit.Graph) shows parse and load under static methods, not under data."""
    import pydoc

    import fusejit

    text = pydoc.render_doc(fusejit.Graph, renderer=pydoc.plaintext)
    static = text[text.index("Static methods defined here"):]
    assert "parse(text: str" in static and "load(path: str" in static
    assert "Data and other attributes" not in text or "parse = " not in text.split("Data and other attributes")[1]
    assert fusejit.Graph.parse("input x : f32[2]\ny = x * 2\noutput y").inputs[0].name == "x"
