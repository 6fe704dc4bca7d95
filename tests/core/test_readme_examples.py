"""The README's adapter and pytest snippets are the tested ones (issue 25): run as written over a
correct Llama-style RoPE, they pass, because the adapter raises Unsupported for what the code does
not implement (before, the pytest snippet gave 39 failures on correct code)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# A user's model code as the snippets import it: Llama's RoPE (float32 angles, rotate_half).
MY_MODEL = '''
import torch

class RotaryEmbedding:
    def __init__(self, dim, base=10000.0):
        self.inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))

    def __call__(self, x, positions):
        freqs = positions[..., None].float() * self.inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)

def apply_rotary_pos_emb(x, cos, sin):
    cos, sin = cos[:, :, None, :], sin[:, :, None, :]
    return x * cos + rotate_half(x) * sin
'''


def _python_blocks() -> list:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```python\n(.*?)```", text, re.S)


def _project(tmp_path: Path) -> dict:
    blocks = _python_blocks()
    adapter = next(b for b in blocks if b.startswith("# my_rope_adapter.py"))
    suite = next(b for b in blocks if "from my_rope_adapter import apply" in b)
    (tmp_path / "my_model.py").write_text(MY_MODEL)
    (tmp_path / "my_rope_adapter.py").write_text(adapter)
    (tmp_path / "test_rope.py").write_text(suite)
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]))


def test_the_readme_adapter_passes_over_a_correct_llama_rope(tmp_path):
    env = _project(tmp_path)
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = re.findall(r"posref conform my_rope_adapter\.py:apply [^\n]*", text)
    assert len(commands) == 2 and "--model llama-3-8b" in commands[0]
    for command in commands:  # as written: at a model, then the catalog in both dtypes
        args = command.rstrip(" \\").split()[2:]
        proc = subprocess.run([sys.executable, "-m", "conformance.cli", "conform", *args, "-q"],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0 and "passed" in proc.stdout, proc.stdout + proc.stderr


def test_the_readme_pytest_snippet_passes_over_a_correct_llama_rope(tmp_path):
    env = _project(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                           "test_rope.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert re.search(r"\d+ passed", proc.stdout)
