"""docs/tutorial.md runs: its python blocks, in order, as one file (the front
end reads a decorated function's source from its file), and its shell block
names Makefile targets that exist."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TUTORIAL = ROOT / "docs" / "tutorial.md"


def blocks(language: str) -> list[str]:
    text = TUTORIAL.read_text(encoding="utf-8")
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.S | re.M)


def test_tutorial_python_blocks_run(tmp_path, capsys):
    code = blocks("python")
    assert len(code) >= 8
    path = tmp_path / "tutorial_blocks.py"
    path.write_text("\n\n".join(code), encoding="utf-8")
    namespace = runpy.run_path(str(path), run_name="tutorial")
    out = capsys.readouterr().out
    assert "def loss(" in out and "bounded" in out
    assert namespace["result"].status == "bounded"


def test_tutorial_shell_block_uses_real_targets():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    (shell,) = blocks("sh")
    for line in shell.splitlines():
        command = line.split("#")[0].strip()
        if command.startswith("make "):
            assert re.search(rf"^{command.split()[1]}:", makefile, flags=re.M), command


def test_readme_first_example_runs(tmp_path):
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    first = re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)[0]
    assert "@chad.function" in first
    path = tmp_path / "readme_example.py"
    check = "\nassert abs(chad.grad(f)(2.0, 3.0) - (3.0 + math.cos(2.0))) < 1e-12\n"
    path.write_text(first + check, encoding="utf-8")
    runpy.run_path(str(path), run_name="readme")
