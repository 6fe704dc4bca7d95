"""The model tables of RoPE's catalog: published configurations (``MODELS``: head_dim, rotary_dim,
base, layout), the scaled ones (``SCALED_MODELS``: HF rope_parameters names, reference.numerics.scaling),
the head sizes in common use (``HEAD_DIMS``), and the flags each configuration gives its cases.
"""

from __future__ import annotations

from reference.numerics.frequencies import frequencies

from .records import rope_params


# --------------------------------------------------------------------------------------------
# Model configurations (head_dim, rotary_dim, base, layout) as published in their configs

MODELS = {
    "llama2-d128": dict(
        params=rope_params(128, 1e4, "half"),
        source="Llama-2-7B as in Hugging Face transformers: hidden 4096 / 32 heads, rope_theta "
        "10000, rotate_half layout (https://huggingface.co/meta-llama/Llama-2-7b-hf).",
        context=4096,
    ),
    "llama2-d128-meta": dict(
        params=rope_params(128, 1e4, "interleaved"),
        source="Llama-2-7B in Meta's reference code: the same frequencies applied to interleaved "
        "pairs through complex multiplication (freqs_cis).",
        context=4096,
    ),
    "llama3-d128": dict(
        params=rope_params(128, 5e5, "half"),
        source="Llama-3-8B: head 128, rope_theta 500000, rotate_half layout "
        "(https://huggingface.co/meta-llama/Meta-Llama-3-8B).",
        context=8192,
    ),
    "qwen2-d128": dict(
        params=rope_params(128, 1e6, "half"),
        source="Qwen2-7B: hidden 3584 / 28 heads = 128, rope_theta 1000000, rotate_half layout "
        "(https://huggingface.co/Qwen/Qwen2-7B).",
        context=32768,
    ),
    "codellama-d128-meta": dict(
        params=rope_params(128, 1e6, "interleaved"),
        source="Code Llama 7B in Meta's reference code (codellama/llama/model.py: freqs_cis, complex "
        "multiplication of interleaved pairs): head 128, rope_theta 1000000, 16384-token training "
        "context (https://huggingface.co/codellama/CodeLlama-7b-hf). An interleaved implementation "
        "that drops the base (torchtune's did) fails it.",
        context=16384,
    ),
    "gpt-neox-20b": dict(
        params=rope_params(96, 1e4, "half", rotary_dim=24),
        source="GPT-NeoX-20B: hidden 6144 / 64 heads = 96, rotary_pct 0.25 so rotary_dim 24, "
        "rotary_emb_base 10000, rotate_half layout (https://huggingface.co/EleutherAI/gpt-neox-20b).",
        context=2048,
    ),
    "gpt-j-6b": dict(
        params=rope_params(256, 1e4, "interleaved", rotary_dim=64),
        source="GPT-J-6B: n_embd 4096 / 16 heads = 256, rotary_dim 64, rotate_every_two "
        "(interleaved) layout (https://huggingface.co/EleutherAI/gpt-j-6b).",
        context=2048,
    ),
}


def model_flags(name):
    params = MODELS[name]["params"]
    flags = ("ModelConfig",)
    if params["rotary_dim"] < params["head_dim"]:
        flags += ("PartialRotary",)
    return flags


HEAD_DIMS = {
    64: "head 64 (e.g. Llama-3.2-1B: hidden 2048 / 32 heads)",
    80: "head 80: 40 pairs, not a power of two",
    96: "head 96: 48 pairs, not a power of two (e.g. Phi-3-mini: hidden 3072 / 32 heads)",
    256: "head 256: 128 pairs (e.g. Gemma-7B)",
}
UNCOMMON_HEAD_DIMS = (80, 96, 256)  # flagged UncommonHeadDim


# --------------------------------------------------------------------------------------------
# Scaled RoPE (reference/numerics/scaling/): real configurations, HF rope_parameters names

PHI3_LONG = (1.0299999713897705, 1.0499999523162842, 1.0499999523162842, 1.0799999237060547,
             1.2299998998641968, 1.2299998998641968, 1.2999999523162842, 1.4499999284744263,
             1.5999999046325684, 1.6499998569488525, 1.8999998569488525, 2.859999895095825,
             3.68999981880188, 5.419999599456787, 5.489999771118164, 5.489999771118164,
             9.09000015258789, 11.579999923706055, 15.65999984741211, 15.769999504089355,
             15.789999961853027, 18.360000610351562, 21.989999771118164, 23.079999923706055,
             30.009998321533203, 32.35000228881836, 32.590003967285156, 35.56000518798828,
             39.95000457763672, 53.840003967285156, 56.20000457763672, 57.95000457763672,
             59.29000473022461, 59.77000427246094, 59.920005798339844, 61.190006256103516,
             61.96000671386719, 62.50000762939453, 63.3700065612793, 63.48000717163086,
             63.48000717163086, 63.66000747680664, 63.850006103515625, 64.08000946044922,
             64.760009765625, 64.80001068115234, 64.81001281738281, 64.81001281738281)
PHI3_SHORT = (1.05, 1.05, 1.05, 1.1, 1.1, 1.1, 1.2500000000000002, 1.2500000000000002,
              1.4000000000000004, 1.4500000000000004, 1.5500000000000005, 1.8500000000000008,
              1.9000000000000008) + (2.000000000000001,) * 19 + (
              2.1000000000000005, 2.1000000000000005, 2.2, 2.3499999999999996, 2.3499999999999996,
              2.3499999999999996, 2.3499999999999996, 2.3999999999999995, 2.3999999999999995,
              2.6499999999999986, 2.6999999999999984, 2.8999999999999977, 2.9499999999999975,
              3.049999999999997, 3.049999999999997, 3.049999999999997)

SCALED_MODELS = {
    "llama3.1-d128": dict(
        params=rope_params(128, 5e5, "half", scaling={
            "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192}),
        source="Llama-3.1-8B: rope_theta 500000, rope_scaling llama3 (factor 8, low_freq_factor 1, "
        "high_freq_factor 4, original 8192) (https://huggingface.co/meta-llama/Llama-3.1-8B).",
        seq_lens=(None,)),
    "llama3.1-d128-meta": dict(
        params=rope_params(128, 5e5, "interleaved", scaling={
            "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192}),
        source="Llama-3.1-8B in Meta's own layout: llama-models' apply_scaling (factor 8, low_freq_factor "
        "1, high_freq_factor 4, original 8192) then freqs_cis, complex multiplication of interleaved "
        "pairs (https://github.com/meta-llama/llama-models/blob/main/models/llama3/model.py); torchtune's "
        "Llama3ScaledRoPE pairs the same way.",
        seq_lens=(None,), same_tables_as="llama3.1-d128"),
    "qwen2.5-yarn4": dict(
        params=rope_params(128, 1e6, "half", scaling={
            "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}),
        source="Qwen2.5-7B-Instruct with the YaRN setting its model card gives for 128K: factor 4, "
        "original 32768, rope_theta 1e6; attention factor 0.1 ln 4 + 1 (https://huggingface.co/Qwen/"
        "Qwen2.5-7B-Instruct).", seq_lens=(None,)),
    "deepseek-v3-yarn40": dict(
        params=rope_params(64, 1e4, "interleaved", scaling={
            "rope_type": "yarn", "factor": 40.0, "original_max_position_embeddings": 4096,
            "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0}),
        source="DeepSeek-V3: qk_rope_head_dim 64, rope_theta 10000, rope_scaling yarn factor 40, "
        "original 4096, beta_fast 32, beta_slow 1, mscale = mscale_all_dim = 1 (so the cos/sin "
        "factor is 1; DeepSeek puts mscale**2 in the softmax scale) "
        "(https://huggingface.co/deepseek-ai/DeepSeek-V3).", seq_lens=(None,)),
    "deepseek-v2-yarn40": dict(
        params=rope_params(64, 1e4, "interleaved", scaling={
            "rope_type": "yarn", "factor": 40.0, "original_max_position_embeddings": 4096,
            "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 0.707, "mscale_all_dim": 0.707}),
        source="DeepSeek-V2: qk_rope_head_dim 64, rope_theta 10000, rope_scaling yarn factor 40, "
        "original 4096, beta_fast 32, beta_slow 1, mscale = mscale_all_dim = 0.707: the cos/sin factor is "
        "get_mscale(40, 0.707) / get_mscale(40, 0.707) = 1, where code that ignores the two keys uses "
        "0.1 ln 40 + 1 = 1.369 (https://huggingface.co/deepseek-ai/DeepSeek-V2).", seq_lens=(None,)),
    "laguna-xs2-yarn64": dict(
        params=rope_params(128, 5e5, "half", rotary_dim=64, scaling={
            "rope_type": "yarn", "factor": 64.0, "original_max_position_embeddings": 4096,
            "beta_fast": 32.0, "beta_slow": 1.0, "attention_factor": 1.0}),
        source="poolside Laguna-XS.2, full-attention layers: head 128, partial_rotary_factor 0.5 so "
        "rotary_dim 64, rope_theta 500000, rotate_half layout, yarn factor 64, original 4096, explicit "
        "attention_factor 1.0 (vLLM ignored the key and used 0.1 ln 64 + 1 = 1.416) "
        "(https://huggingface.co/poolside/Laguna-XS.2).", seq_lens=(None,), decodes=(131071, 262143)),
    "laguna-xs2-yarn64-interleaved": dict(
        params=rope_params(128, 5e5, "interleaved", rotary_dim=64, scaling={
            "rope_type": "yarn", "factor": 64.0, "original_max_position_embeddings": 4096,
            "beta_fast": 32.0, "beta_slow": 1.0, "attention_factor": 1.0}),
        source="Laguna-XS.2's full-attention YaRN (rotary_dim 64 of head 128, base 500000, factor 64, "
        "original 4096, attention_factor 1.0) in the interleaved layout, as Megatron-Core's "
        "rotary_interleaved applies the same frequencies: YaRN with partial rotary in the other pair "
        "layout (Megatron's YaRN ignored rotary_percent).", seq_lens=(None,), same_tables_as="laguna-xs2-yarn64"),
    "qwen3.6-yarn4": dict(
        params=rope_params(256, 1e7, "half", rotary_dim=64, scaling={
            "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 262144,
            "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 0.0}),
        source="Qwen3.6's YaRN setting: head 256, partial_rotary_factor 0.25 so rotary_dim 64, "
        "rope_theta 1e7, factor 4 over original 262144, mscale 1 and mscale_all_dim 0: HF falls back "
        "to 0.1 ln 4 + 1 = 1.1386 since mscale_all_dim is 0 (transformers _compute_yarn_parameters: "
        "'if mscale and mscale_all_dim').", seq_lens=(None,), decodes=(262143, 1048575)),
    "gpt-oss-yarn32": dict(
        params=rope_params(64, 150000.0, "half", scaling={
            "rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": 4096,
            "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False}),
        source="gpt-oss: head_dim 64, rope_theta 150000, yarn factor 32, original 4096, "
        "truncate false (no floor/ceil of the ramp ends) (https://huggingface.co/openai/gpt-oss-20b).",
        seq_lens=(None,)),
    "phi3-128k-longrope": dict(
        params=rope_params(96, 1e4, "half", scaling={
            "rope_type": "longrope", "short_factor": list(PHI3_SHORT), "long_factor": list(PHI3_LONG),
            "original_max_position_embeddings": 4096, "max_position_embeddings": 131072}),
        source="Phi-3 128k (LongRoPE, 'su'): head 96, rope_theta 10000, original 4096, max 131072, "
        "short and long factors of Phi-3-vision-128k-instruct's config; attention factor "
        "sqrt(1 + ln 32 / ln 4096).", seq_lens=(4096, 4097)),
    "llama2-dynamic2": dict(
        params=rope_params(128, 1e4, "half", scaling={
            "rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 4096}),
        source="Llama-2 with dynamic NTK scaling, factor 2 (HF rope_scaling {'type': 'dynamic', "
        "'factor': 2.0}), original 4096.", seq_lens=(2048, 4096, 16384)),
    "qwen3-length-8k": dict(
        params=rope_params(128, 1e6, "half", scaling={
            "rope_type": "length", "original_max_position_embeddings": 8192}),
        source="The length rule of seed document 003 (dynamic RoPE as described for Qwen3): "
        "theta' = theta * min(1, L0 / L), L0 = 8192.", seq_lens=(4096, 8192, 32768)),
    "llama2-linear4": dict(
        params=rope_params(128, 1e4, "half", scaling={"rope_type": "linear", "factor": 4.0}),
        source="Linear position interpolation (Chen et al. 2023) by 4 on Llama-2 (4096 -> 16384).",
        seq_lens=(None,)),
    "llama2-ntk4": dict(
        params=rope_params(128, 1e4, "half", scaling={"rope_type": "ntk", "factor": 4.0}),
        source="Static NTK-aware scaling by 4 on Llama-2: base 10000 * 4**(128/126).",
        seq_lens=(None,)),
}


def attention_factor(params):
    return float(frequencies(params["rotary_dim"], params["base"], params["scaling"], None)[1])


def scaling_flags(name):
    scaling = SCALED_MODELS[name]["params"]["scaling"]
    flags = ("Scaling",)
    if scaling["rope_type"] in ("dynamic", "length", "longrope"):
        flags += ("SeqLenDependent",)
    params = SCALED_MODELS[name]["params"]
    if scaling["rope_type"] in ("yarn", "longrope") and attention_factor(params) != 1.0:
        flags += ("AttentionFactor",)
    if "attention_factor" in scaling or "mscale" in scaling:
        flags += ("ExplicitAttentionFactor",)
    if params["rotary_dim"] < params["head_dim"]:
        flags += ("PartialRotary", "PartialRotaryScaling")
    return flags
