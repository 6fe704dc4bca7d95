"""Issue 23, section 4: committed cases that reach RoPE bugs that really happened, and a default
run that catches an unrotated tile tail whatever its seed.

Each re-enactment below is a small adapter written here (in tmp_path, as a user would write one)
that carries one documented bug; the committed cases must fail it, where before they did not exist
or did not reach it.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import mpmath
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from conformance import run_conformance  # noqa: E402
from reference import rope as rr  # noqa: E402
from reference.golden import catalog  # noqa: E402
from reference.numerics import scaling_oracle  # noqa: E402
from reference.rope import vectors  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "rope"

LAGUNA = vectors.SCALED_MODELS["laguna-xs2-yarn64"]["params"]
DEEPSEEK_V2 = vectors.SCALED_MODELS["deepseek-v2-yarn40"]["params"]
QWEN36 = vectors.SCALED_MODELS["qwen3.6-yarn4"]["params"]


def catalog_ids():
    return {f"{g.protocol}/{g.name}/{t.name}": tg.params
            for g in catalog.select("rope") for tg in g.test_groups for t in tg.tests}


# ------------------------------------------------------------------------------------------
# The YaRN attention factor, as transformers decides it


def yarn_factor(params):
    return float(rr.frequencies(params["rotary_dim"], params["base"], params["scaling"], None)[1])


def test_yarn_attention_factor_follows_transformers_rule():
    # explicit attention_factor is the final value (Laguna-XS.2: 1.0 at factor 64, not 1.416)
    assert yarn_factor(LAGUNA) == 1.0
    # mscale / mscale_all_dim, both non-zero: their ratio (DeepSeek-V2: 0.707 / 0.707)
    assert yarn_factor(DEEPSEEK_V2) == 1.0
    # mscale_all_dim 0: HF's `if mscale and mscale_all_dim` falls back to 0.1 ln s + 1
    assert yarn_factor(QWEN36) == pytest.approx(0.1 * math.log(4.0) + 1.0, rel=1e-15)
    odd = {"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 4096, "mscale": 0.707,
           "mscale_all_dim": 0.0}
    assert float(rr.frequencies(64, 1e4, odd)[1]) == pytest.approx(0.1 * math.log(16.0) + 1.0, rel=1e-15)
    both = dict(odd, mscale_all_dim=1.0)
    ratio = (0.1 * 0.707 * math.log(16.0) + 1.0) / (0.1 * math.log(16.0) + 1.0)
    assert float(rr.frequencies(64, 1e4, both)[1]) == pytest.approx(ratio, rel=1e-15)
    with pytest.raises(ValueError, match="non-negative"):
        rr.frequencies(64, 1e4, dict(odd, mscale_all_dim=-1.0))


@pytest.mark.parametrize("params", [LAGUNA, DEEPSEEK_V2, QWEN36], ids=["laguna", "deepseek-v2", "qwen3.6"])
def test_yarn_matches_transformers_compute_yarn_parameters(params):
    mru = pytest.importorskip("transformers.modeling_rope_utils")
    from transformers import PreTrainedConfig

    sc, hd, r = params["scaling"], params["head_dim"], params["rotary_dim"]
    config = PreTrainedConfig(hidden_size=4 * hd, num_attention_heads=4, head_dim=hd,
                              max_position_embeddings=int(sc["original_max_position_embeddings"] * sc["factor"]),
                              rope_parameters={**sc, "rope_theta": params["base"], "partial_rotary_factor": r / hd})
    inv, af = mru._compute_yarn_parameters(config, device=torch.device("cpu"))
    ours, our_af = rr.frequencies(r, params["base"], sc)
    assert float(our_af) == pytest.approx(float(af), rel=1e-15)
    np.testing.assert_allclose(inv.double().numpy(), np.asarray(ours), rtol=4e-7)  # HF: float32


def test_yarn_ramp_is_exact_when_both_clamps_bind():
    """Issue 23, section 6: with low clamped to 0 and high to r - 1 (Python ints), the ramp must
    still be exact: every inv_freq the float64 nearest to theta_i (1 - (i / 7)(1 - 1/2))."""
    sc = {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 2, "beta_slow": 1e-9}
    got = np.asarray(rr.frequencies(8, 1e4, sc)[0])
    with mpmath.workprec(200):
        want = [float(mpmath.mpf(10000) ** (-mpmath.mpf(2 * i) / 8) * (1 - mpmath.mpf(i) / 7 / 2)) for i in range(4)]
        oracle, _ = scaling_oracle.exact(sc, 8, 1e4, None)
        assert [float(t) for t in oracle] == want
    assert got.tolist() == want


# ------------------------------------------------------------------------------------------
# The committed cases exist with the configurations they claim


def test_new_cases_are_in_the_catalog():
    ids = catalog_ids()
    for name in ("laguna-xs2-yarn64", "laguna-xs2-yarn64-interleaved", "deepseek-v2-yarn40", "qwen3.6-yarn4",
                 "llama3.1-d128-meta", "codellama-d128-meta"):
        assert any(i.startswith(f"rope.apply/{name}/") for i in ids), name
    laguna = ids["rope.apply/laguna-xs2-yarn64/decode-262143"]
    assert (laguna["head_dim"], laguna["rotary_dim"], laguna["layout"]) == (128, 64, "half")
    assert laguna["scaling"]["attention_factor"] == 1.0 and laguna["scaling"]["factor"] == 64.0
    assert ids["rope.apply/laguna-xs2-yarn64-interleaved/prefill-8"]["layout"] == "interleaved"
    assert ids["rope.apply/codellama-d128-meta/decode-100000"]["base"] == 1e6
    meta = ids["rope.apply/llama3.1-d128-meta/decode-131071"]
    assert meta["layout"] == "interleaved" and meta["scaling"]["rope_type"] == "llama3"
    for script in ("interleaved-two-offsets", "interleaved-partial-cast"):
        assert ids[f"rope.module/scripts-d32/{script}"]["layout"] == "interleaved"
    assert ids["rope.module/scripts-d32/interleaved-partial-cast"]["rotary_dim"] == 16


# ------------------------------------------------------------------------------------------
# Re-enactments: each documented bug fails the new cases

ADAPTER = '''
import numpy as np
import torch

from conformance import Unsupported
from reference import rope


def apply(x, positions, spec):
    if getattr(spec, "tensor_layout", "bshd") != "bshd":
        raise Unsupported("bshd only")
    scaling, base, r = spec.scaling, spec.base, spec.rotary_dim
{body}
    inv, af = rope.frequencies(r_freq, base, scaling, spec.seq_len)
    inv = torch.tensor(np.asarray(inv, dtype=np.float64)[: r // 2])
    phi = positions[..., None].double() * inv
    c, s = (phi.cos() * float(af))[:, :, None, :], (phi.sin() * float(af))[:, :, None, :]
    xd = x.double()
    if spec.layout == "half":
        a, b = xd[..., : r // 2], xd[..., r // 2: r]
        out = torch.cat((a * c - b * s, a * s + b * c), dim=-1)
    else:
        a, b = xd[..., 0:r:2], xd[..., 1:r:2]
        out = torch.stack((a * c - b * s, a * s + b * c), dim=-1).flatten(-2)
    return torch.cat((out, xd[..., r:]), dim=-1).to(x.dtype)
'''


def adapter(tmp_path, name, body):
    path = tmp_path / f"{name}.py"
    path.write_text(ADAPTER.format(body=textwrap.indent(textwrap.dedent(body), "    ")))
    return f"{path}:apply"


def grade(target, cases):
    report = run_conformance(target, "rope.apply", dtypes=("float32",), fresh=False, cases=cases)
    return {c.id: c for c in report.cases}


def test_the_re_enactment_adapter_is_correct_without_its_bug(tmp_path):
    target = adapter(tmp_path, "correct", "r_freq = r\n")
    cases = grade(target, "rope.apply/laguna-*/*,rope.apply/deepseek-v2-yarn40/*,rope.apply/qwen3.6-yarn4/*,"
                          "rope.apply/codellama-d128-meta/*,rope.apply/llama3.1-d128-meta/*")
    assert len(cases) == 18 and all(c.verdict == "pass" for c in cases.values())


@pytest.mark.parametrize("cases, body, code", [
    # vLLM's get_rope dropped `attention_factor` and used 0.1 ln 64 + 1 = 1.416 (Laguna-XS.2)
    ("rope.apply/laguna-xs2-yarn64*/*",
     "scaling = {k: v for k, v in scaling.items() if k != 'attention_factor'}\nr_freq = r\n", "attention-factor"),
    # mscale / mscale_all_dim ignored: DeepSeek-V2's factor 1 becomes 0.1 ln 40 + 1 = 1.369
    ("rope.apply/deepseek-v2-yarn40/*",
     "scaling = {k: v for k, v in scaling.items() if not k.startswith('mscale')}\nr_freq = r\n", "attention-factor"),
    # torchtune's interleaved RoPE dropped Code Llama's base 1e6
    ("rope.apply/codellama-d128-meta/*", "base = 10000.0\nr_freq = r\n", "wrong-base"),
    # an interleaved implementation without Llama 3.1's scaling (Meta's layout)
    ("rope.apply/llama3.1-d128-meta/*", "scaling = None\nr_freq = r\n", "scaling-mismatch"),
])
def test_each_documented_bug_fails_the_new_cases_with_its_code(tmp_path, cases, body, code):
    graded = grade(adapter(tmp_path, "bug", body), cases)
    assert graded and all(c.verdict == "fail" for c in graded.values()), {i: c.verdict for i, c in graded.items()}
    assert all(code in {d.code for d in c.diagnoses} for c in graded.values()), \
        {i: [d.code for d in c.diagnoses] for i, c in graded.items()}


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_yarn_ignoring_partial_rotary_fails_in_both_layouts(tmp_path, layout):
    """Megatron's YaRN ignored rotary_percent: the frequencies of the whole head (head_dim) on the
    rotary features."""
    graded = grade(adapter(tmp_path, "megatron", "r_freq = spec.head_dim\n"),
                   f"rope.apply/laguna-xs2-yarn64{'-interleaved' if layout == 'interleaved' else ''}/*")
    assert graded and all(c.verdict == "fail" for c in graded.values())
    assert all(c.id.split("/")[1].endswith("interleaved") == (layout == "interleaved") for c in graded.values())


def test_an_interleaved_module_is_graded_on_interleaved_scripts():
    report = run_conformance(f"{EXAMPLES / 'module_torch.py'}:module", "rope.module", dtypes=("float32",),
                             fresh=False, cases="rope.module/scripts-d32/interleaved-*")
    verdicts = {c.id: c.verdict for c in report.cases}
    assert set(verdicts) == {"rope.module/scripts-d32/interleaved-two-offsets",
                             "rope.module/scripts-d32/interleaved-partial-cast"}
    assert set(verdicts.values()) <= {"pass", "acceptable"}  # graded, not skipped


# ------------------------------------------------------------------------------------------
# The unrotated tile tail is caught by every default run


@pytest.mark.parametrize("seed", range(21))
def test_tile_tail_bug_fails_the_default_run_at_every_seed(seed):
    target = f"{EXAMPLES / 'buggy' / 'tile_tail_unrotated.py'}:apply"
    report = run_conformance(target, "rope.apply", dtypes=("float32",), seed=seed,
                             cases="rope.apply/fresh-*/shape-*")  # the default (sampled) matrix
    assert report.summary()["overall"] == "fail"
    tails = [c for c in report.cases if c.verdict == "fail"]
    assert any(c.id.endswith(f"shape-seq-{n}-half") for c in tails for n in (65, 129, 257))
    assert all("tile-tail-unrotated" in {d.code for d in c.diagnoses} for c in tails)


def test_fresh_cases_draw_the_new_configurations():
    """The fresh rotations of rope.apply and rope.cache draw from every model configuration, the
    new ones included, so that their answers cannot be looked up in a file either."""
    from reference.golden.fresh import Draw

    new = {"laguna-xs2-yarn64", "laguna-xs2-yarn64-interleaved", "deepseek-v2-yarn40", "qwen3.6-yarn4",
           "llama3.1-d128-meta", "codellama-d128-meta"}
    for protocol in ("rope.apply", "rope.cache"):
        drawn = {t.name.rsplit("-", 1)[0] for seed in range(80)
                 for tg in vectors._fresh_rotations(Draw(seed, protocol), protocol) for t in tg.tests}
        assert new <= drawn, new - drawn


ROTARY_MODULE = '''
import torch
from rotary_embedding_torch import RotaryEmbedding, apply_rotary_emb

from conformance import Unsupported


class Module(torch.nn.Module):
    def __init__(self, spec):
        super().__init__()
        self.rotary = RotaryEmbedding(dim=spec.rotary_dim, theta=spec.base)

    def forward(self, x, positions):
        freqs = self.rotary(positions)  # [b, s, rotary_dim], each angle twice (interleaved)
        return apply_rotary_emb(freqs[:, :, None, :], x)


def module(spec):
    if spec.layout != "interleaved" or spec.scaling is not None:
        raise Unsupported("rotary-embedding-torch: interleaved pairs, no scaling")
    return Module(spec)
'''


def test_rotary_embedding_torch_as_a_module_runs_the_interleaved_scripts(tmp_path):
    pytest.importorskip("rotary_embedding_torch")
    path = tmp_path / "rotary_module.py"
    path.write_text(ROTARY_MODULE)
    report = run_conformance(f"{path}:module", "rope.module", dtypes=("float32",), fresh=False)
    graded = {c.id.rsplit("/", 1)[1]: c.verdict for c in report.cases if c.verdict != "skip"}
    assert set(graded) == {"interleaved-two-offsets", "interleaved-partial-cast"}
    assert set(graded.values()) <= {"pass", "acceptable"}, graded
