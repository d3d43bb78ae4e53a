#!/usr/bin/env python3
"""An independent peer check of the `llama` binary against Hugging Face transformers.

What it checks
    For each case in CASES this script writes a random Hugging Face model directory itself
    (`config.json` as transformers 4 or 5 writes it; `model.safetensors`, or shards listed
    by `model.safetensors.index.json`, encoded by hand in bf16, f16 or f32), runs
    `llama --cpu --weights DIR` on it, and compares with a numpy re-implementation of
    transformers' `LlamaForCausalLM` (`modeling_llama.py`; the frequencies of
    `_compute_llama3_parameters` in `modeling_rope_utils.py`) loaded in bf16: every tensor
    that torch holds in bf16 (weights, embedding rows, both roundings of LlamaRMSNorm, each
    Linear output, cos/sin, the RoPE products and sum, the attention output, SiLU and its
    product with up, residual sums, the logits) is rounded to bf16 (nearest even), and the
    arithmetic inside each op is f32. Attention is scaled-dot-product attention computed
    in f32 from bf16 q, k, v, its output rounded once. The peer shares no code with the
    Rust crate.

    Per case and sequence of the batch:
    (a) teacher forcing: the Rust run's tokens are fed through the peer, and at every step
        the peer's logit of the token Rust chose must be within `top1` of the peer's largest
        logit (a bf16 tie or near-tie may go either way; a wrong model chooses tokens that
        the peer ranks well below its best);
    (b) the last step's logits [B, vocab] must match the peer's elementwise within `logits`.
    It also reports for how many steps the peer's own greedy run agrees with Rust's (not
    checked: one bf16 near-tie legitimately sends the two down different paths).

Why the tolerances are what they are
    HF's bf16 forward and the Rust megakernel round at different places (HF rounds the
    normalized x before the norm weight, o_proj's and down_proj's outputs before the
    residual add, cos/sin, gate and up before SiLU, and the logits; the kernel fuses these
    and rounds once), so their logits differ by the effect of a few bf16 roundings (2^-9
    relative each) per layer. That effect is measured for each case: the peer runs a second
    time with no rounding at all (f32 activations, the same bf16 weights), and the largest
    |bf16 - f32| over all teacher-forced logits is the case's "bf16 noise", i.e. how far HF's
    own bf16 run is from exact arithmetic on this model. Another bf16 implementation must be
    within a small multiple of that: `logits` = NOISE_MULTIPLE (3) x noise. Observed
    Rust-vs-peer differences are 0.65 to 1.3 x noise (noise 0.04 to 0.15 on logits of
    scale ~5); a peer that rounds where the kernel rounds instead matches Rust to within
    0.015 (exactly in most cases), so the differences are rounding placement only. Each
    wrong op tried in the peer (interleaved RoPE pairs instead of rotate_half, GQA head
    h % kv, no norm weight, the embedding as an untied head, no llama3 frequency scaling,
    attention scale 1/head_dim, gate and up swapped) fails every case it applies to, with
    differences of 0.13 to 7 (mostly above 1; the llama3 scaling needs the long cases).
    `top1` = 2 x `logits`: when every logit is within `logits`, the token Rust chose is
    within 2 x `logits` of the peer's best.

How to run
    cargo build -p llama
    PYTHONPATH=.tools/py python3 examples/llama/peer/hf_peer.py [--llama PATH] [-v]
    Needs numpy only (`scripts/test` installs it into .tools/py). The binary is --llama,
    else $LLAMA_BIN, else target/debug/llama under the repository root; nothing is built
    here. Prints one line per case; exits non-zero on any mismatch, naming the case, the
    sequence, the step and the values.

    On a GPU machine, `--gpu` runs the binary there (it must report a GPU backend), and
    `--shapes llama-3.2-1b` (or `all`) adds Llama-3.2-1B's shapes with 2 layers at batch 1,
    8 and 3 (the batch-8 megakernel with idle slots), the megakernel's real tiles (with a release binary: a minute or two; on the
    CPU backend too, `--llama target/release/llama`, about 100 s on 2 cores):
        python3 hf_peer.py --gpu --shapes all --llama target/release/llama
"""

import argparse
import json
import math
import os
import struct
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[3]

# Rust's logits may differ from the peer's by this many times the case's bf16 noise.
NOISE_MULTIPLE = 3


@dataclass
class Shapes:
    """A preset the binary is stamped for: its config.json keys and llama3 RoPE scaling
    (the number of layers and the tying of the head are free)."""

    config: dict
    rope: dict

    @property
    def weight_scale(self):
        """Projections, embedding and head are drawn with this factor on tiny's scales, so
        that activations and logits stay of the same order at a wider hidden size."""
        return math.sqrt(SHAPES["tiny"].config["hidden_size"] / self.config["hidden_size"])


SHAPES = {
    # the CPU binary's shapes (small enough for numpy and the debug build)
    "tiny": Shapes(
        config={
            "hidden_size": 128,
            "intermediate_size": 256,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 64,
            "vocab_size": 256,
            "rms_norm_eps": 1e-05,
            "rope_theta": 10000.0,
            "max_position_embeddings": 2048,
        },
        rope={
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 256,
            "rope_type": "llama3",
        },
    ),
    # Llama-3.2-1B's shapes, for a GPU run of the megakernel's real tiles (`--gpu`)
    "llama-3.2-1b": Shapes(
        config={
            "hidden_size": 2048,
            "intermediate_size": 8192,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "head_dim": 64,
            "vocab_size": 128256,
            "rms_norm_eps": 1e-05,
            "rope_theta": 500000.0,
            "max_position_embeddings": 131072,
        },
        rope={
            "factor": 32.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
            "rope_type": "llama3",
        },
    ),
}


# ---------------------------------------------------------------------------------------
# bf16


def round_bf16(x):
    """`x` (f32) rounded to the nearest bf16, ties to even, returned as f32."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))
    return (rounded & np.uint32(0xFFFF0000)).view(np.float32)


def no_rounding(x):
    return np.asarray(x, dtype=np.float32)


# ---------------------------------------------------------------------------------------
# The cases


@dataclass
class Case:
    name: str
    layers: int
    tied: bool
    config_format: str  # "hf4": rope_theta + rope_scaling; "hf5": rope_parameters
    shards: int  # 1: model.safetensors; more: an index and that many files
    dtype: str  # stored dtype: "bf16", "f16" or "f32"
    batch: int
    prompt: list
    tokens: int
    seed: int = 0
    shapes: str = "tiny"
    positions: int = field(init=False)

    def __post_init__(self):
        self.positions = len(self.prompt) + self.tokens - 1


PROMPT6 = [17, 200, 3, 99, 45, 128]
CASES = [
    Case("tied-1L-hf4-single-bf16-b1-p1", 1, True, "hf4", 1, "bf16", 1, [7], 12, seed=1),
    Case("untied-3L-hf5-2shards-bf16-b3-p6", 3, False, "hf5", 2, "bf16", 3, PROMPT6, 12, seed=2),
    Case("untied-1L-hf4-2shards-f32-b1-p6", 1, False, "hf4", 2, "f32", 1, PROMPT6, 10, seed=3),
    Case("tied-3L-hf5-single-f16-b3-p1", 3, True, "hf5", 1, "f16", 3, [250], 8, seed=4),
    Case("untied-2L-hf4-single-bf16-b1-p6-80pos", 2, False, "hf4", 1, "bf16", 1, PROMPT6, 75, seed=5),
    Case("tied-2L-hf5-2shards-bf16-b1-p1-80pos", 2, True, "hf5", 2, "bf16", 1, [42], 80, seed=6),
]
# Llama-3.2-1B's shapes with fewer layers (a run-time dim), at two batches it is stamped for
# and one it runs on a larger stamp
CASES_1B = [
    Case("1b-tied-2L-hf4-single-bf16-b1-p6", 2, True, "hf4", 1, "bf16", 1, PROMPT6, 16, seed=7, shapes="llama-3.2-1b"),
    Case("1b-untied-2L-hf5-2shards-bf16-b8-p1", 2, False, "hf5", 2, "bf16", 8, [42], 8, seed=8, shapes="llama-3.2-1b"),
    # the batch-8 stamp with five idle slots
    Case("1b-tied-2L-hf4-single-bf16-b3-p6", 2, True, "hf4", 1, "bf16", 3, PROMPT6, 6, seed=9, shapes="llama-3.2-1b"),
]


# ---------------------------------------------------------------------------------------
# Writing a Hugging Face model directory


def hf_config(case):
    """The `config.json` dict of a `LlamaForCausalLM` as transformers 4.x or 5.x saves it."""
    shapes = SHAPES[case.shapes]
    c = shapes.config
    common = {
        "architectures": ["LlamaForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "head_dim": c["head_dim"],
        "hidden_act": "silu",
        "hidden_size": c["hidden_size"],
        "initializer_range": 0.02,
        "intermediate_size": c["intermediate_size"],
        "max_position_embeddings": c["max_position_embeddings"],
        "mlp_bias": False,
        "model_type": "llama",
        "num_attention_heads": c["num_attention_heads"],
        "num_hidden_layers": case.layers,
        "num_key_value_heads": c["num_key_value_heads"],
        "pretraining_tp": 1,
        "rms_norm_eps": c["rms_norm_eps"],
        "tie_word_embeddings": case.tied,
        "use_cache": True,
        "vocab_size": c["vocab_size"],
    }
    dtype_name = {"bf16": "bfloat16", "f16": "float16", "f32": "float32"}[case.dtype]
    if case.config_format == "hf4":
        return {
            **common,
            "rope_scaling": dict(shapes.rope),
            "rope_theta": c["rope_theta"],
            "torch_dtype": dtype_name,
            "transformers_version": "4.46.3",
        }
    return {
        **common,
        "dtype": dtype_name,
        "pad_token_id": None,
        "rope_parameters": {**shapes.rope, "rope_theta": c["rope_theta"]},
        "transformers_version": "5.0.0",
    }


def tensor_shapes(config):
    """HF's tensor names and shapes (`nn.Linear` weights are [out, in]); lm_head if untied."""
    h, i, v = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    d = config["head_dim"]
    q, kv = config["num_attention_heads"] * d, config["num_key_value_heads"] * d
    shapes = {"model.embed_tokens.weight": (v, h)}
    for layer in range(config["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        shapes[p + "input_layernorm.weight"] = (h,)
        shapes[p + "self_attn.q_proj.weight"] = (q, h)
        shapes[p + "self_attn.k_proj.weight"] = (kv, h)
        shapes[p + "self_attn.v_proj.weight"] = (kv, h)
        shapes[p + "self_attn.o_proj.weight"] = (h, q)
        shapes[p + "post_attention_layernorm.weight"] = (h,)
        shapes[p + "mlp.gate_proj.weight"] = (i, h)
        shapes[p + "mlp.up_proj.weight"] = (i, h)
        shapes[p + "mlp.down_proj.weight"] = (h, i)
    shapes["model.norm.weight"] = (h,)
    if not config["tie_word_embeddings"]:
        shapes["lm_head.weight"] = (v, h)
    return shapes


def random_tensor(name, shape, rng, scale):
    """f32 values for non-degenerate greedy decoding: norm weights 1 +- 0.25, and at tiny's
    width (`scale` 1) projections 0.1 (activations of order 1), embedding 0.1 (small enough
    next to the layers' outputs that a tied head does not just repeat the input token) and
    an untied head 0.15 (logits of a few units)."""
    if name.endswith("norm.weight"):
        return 1.0 + 0.25 * rng.standard_normal(shape)
    std = 0.15 if name == "lm_head.weight" else 0.1
    return std * scale * rng.standard_normal(shape)


def stored_values(values, dtype):
    """The values as stored in a checkpoint of `dtype`, as numpy arrays."""
    values = np.asarray(values, dtype=np.float32)
    if dtype == "bf16":
        return round_bf16(values)
    if dtype == "f16":
        return values.astype(np.float16)
    return values


def tensor_bytes(stored, dtype):
    if dtype == "bf16":
        return (stored.view(np.uint32) >> np.uint32(16)).astype("<u2").tobytes()
    return stored.astype("<f2" if dtype == "f16" else "<f4").tobytes()


def write_safetensors(path, tensors, dtype):
    """A safetensors file by hand: u64 LE header length, JSON header, raw data."""
    st_dtype = {"bf16": "BF16", "f16": "F16", "f32": "F32"}[dtype]
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, stored in tensors.items():
        blob = tensor_bytes(stored, dtype)
        header[name] = {"dtype": st_dtype, "shape": list(stored.shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned, as safetensors writes
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    return offset


def write_model_dir(directory, case, stored):
    """config.json plus one file, or `case.shards` files and the index."""
    (directory / "config.json").write_text(json.dumps(hf_config(case), indent=2, sort_keys=True) + "\n")
    names = list(stored)
    if case.shards == 1:
        write_safetensors(directory / "model.safetensors", stored, case.dtype)
        return
    per_shard = math.ceil(len(names) / case.shards)
    weight_map, total = {}, 0
    for k in range(case.shards):
        file = f"model-{k + 1:05d}-of-{case.shards:05d}.safetensors"
        chunk = names[k * per_shard : (k + 1) * per_shard]
        total += write_safetensors(directory / file, {n: stored[n] for n in chunk}, case.dtype)
        weight_map.update({n: file for n in chunk})
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (directory / "model.safetensors.index.json").write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")


# ---------------------------------------------------------------------------------------
# The peer: transformers' LlamaForCausalLM in numpy


@dataclass
class PeerConfig:
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    rms_norm_eps: float
    rope_theta: float
    rope: dict  # rope_type and its parameters
    tie_word_embeddings: bool


def parse_hf_config(text):
    """Reads config.json as transformers does: transformers 5 keeps rope_theta inside
    `rope_parameters`; transformers 4 has top-level `rope_theta` and `rope_scaling`."""
    c = json.loads(text)
    rope = c.get("rope_parameters") or c.get("rope_scaling") or {"rope_type": "default"}
    theta = rope.get("rope_theta", c.get("rope_theta", 10000.0))
    heads = c["num_attention_heads"]
    return PeerConfig(
        hidden_size=c["hidden_size"],
        intermediate_size=c["intermediate_size"],
        num_layers=c["num_hidden_layers"],
        num_heads=heads,
        num_kv_heads=c.get("num_key_value_heads") or heads,
        head_dim=c.get("head_dim") or c["hidden_size"] // heads,
        vocab_size=c["vocab_size"],
        rms_norm_eps=c.get("rms_norm_eps", 1e-6),
        rope_theta=theta,
        rope={"rope_type": rope.get("rope_type", rope.get("type", "default")), **rope},
        tie_word_embeddings=c.get("tie_word_embeddings", False),
    )


def rope_inv_freq(config):
    """`_compute_default_rope_parameters` then `_compute_llama3_parameters`, in f32 as torch."""
    dim = config.head_dim
    exponents = np.arange(0, dim, 2, dtype=np.int64).astype(np.float32) / np.float32(dim)
    inv_freq = np.float32(1.0) / (np.float32(config.rope_theta) ** exponents)
    if config.rope["rope_type"] != "llama3":
        return inv_freq
    factor = config.rope["factor"]
    low, high = config.rope["low_freq_factor"], config.rope["high_freq_factor"]
    old_context = config.rope["original_max_position_embeddings"]
    low_freq_wavelen, high_freq_wavelen = old_context / low, old_context / high
    wavelen = np.float32(2 * math.pi) / inv_freq
    # long wavelengths divided by the factor, short ones kept, those between interpolated
    scaled = np.where(wavelen > low_freq_wavelen, inv_freq / np.float32(factor), inv_freq)
    smooth = (np.float32(old_context) / wavelen - np.float32(low)) / np.float32(high - low)
    smoothed = (1 - smooth) * scaled / np.float32(factor) + smooth * scaled
    is_medium = ~(wavelen < high_freq_wavelen) & ~(wavelen > low_freq_wavelen)
    return np.where(is_medium, smoothed, scaled).astype(np.float32)


def rotate_half(x):
    """HF's layout: element i is paired with element i + head_dim / 2."""
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def silu(x):
    return x / (np.float32(1) + np.exp(-x))


class PeerLlama:
    """LlamaForCausalLM's forward over a whole token sequence (prefill with a causal
    mask, which a KV-cached decode reproduces row for row). `rounding` is round_bf16 for
    a bf16 model, no_rounding for an all-f32 evaluation of the same weights."""

    def __init__(self, config, weights, rounding=round_bf16):
        self.c = config
        self.w = weights
        self.r = rounding
        self.inv_freq = rope_inv_freq(config)

    def linear(self, x, name):
        """nn.Linear without bias: x @ W.T, f32 accumulation, output in the model dtype."""
        return self.r(x @ self.w[name].T)

    def rms_norm(self, x, name):
        """LlamaRMSNorm: f32 variance, `weight * hidden.to(input_dtype)`."""
        variance = np.mean(x * x, axis=-1, keepdims=True)
        normalized = self.r(x * (np.float32(1) / np.sqrt(variance + np.float32(self.c.rms_norm_eps))))
        return self.r(self.w[name] * normalized)

    def cos_sin(self, positions):
        """LlamaRotaryEmbedding.forward: f32 angles, cos/sin cast to the model dtype."""
        freqs = positions.astype(np.float32)[:, None] * self.inv_freq[None, :]
        emb = np.concatenate([freqs, freqs], axis=-1)
        return self.r(np.cos(emb)), self.r(np.sin(emb))

    def apply_rope(self, x, cos, sin):
        """q * cos + rotate_half(q) * sin, each product and the sum in the model dtype."""
        cos, sin = cos[:, None, :], sin[:, None, :]
        return self.r(self.r(x * cos) + self.r(rotate_half(x) * sin))

    def attention(self, q, k, v):
        """Causal SDPA with GQA (repeat_kv: query head h reads KV head h // group)."""
        group = self.c.num_heads // self.c.num_kv_heads
        k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
        scores = np.einsum("thd,shd->hts", q, k) * np.float32(self.c.head_dim**-0.5)
        t = q.shape[0]
        scores = np.where(np.tri(t, dtype=bool)[None], scores, np.float32(-np.inf))
        probs = np.exp(scores - scores.max(axis=-1, keepdims=True))
        probs /= probs.sum(axis=-1, keepdims=True)
        out = np.einsum("hts,shd->thd", probs, v)
        return self.r(out.reshape(t, -1))

    def self_attn(self, x, layer, cos, sin):
        p = f"model.layers.{layer}.self_attn."
        t, d = x.shape[0], self.c.head_dim
        q = self.linear(x, p + "q_proj.weight").reshape(t, self.c.num_heads, d)
        k = self.linear(x, p + "k_proj.weight").reshape(t, self.c.num_kv_heads, d)
        v = self.linear(x, p + "v_proj.weight").reshape(t, self.c.num_kv_heads, d)
        q, k = self.apply_rope(q, cos, sin), self.apply_rope(k, cos, sin)
        return self.linear(self.attention(q, k, v), p + "o_proj.weight")

    def mlp(self, x, layer):
        p = f"model.layers.{layer}.mlp."
        gate = self.linear(x, p + "gate_proj.weight")
        up = self.linear(x, p + "up_proj.weight")
        return self.linear(self.r(self.r(silu(gate)) * up), p + "down_proj.weight")

    def head_name(self):
        return "model.embed_tokens.weight" if self.c.tie_word_embeddings else "lm_head.weight"

    def logits(self, tokens):
        """The logits [T, vocab] (f32 holding model-dtype values) after each token."""
        tokens = np.asarray(tokens)
        cos, sin = self.cos_sin(np.arange(len(tokens)))
        h = self.w["model.embed_tokens.weight"][tokens]
        for layer in range(self.c.num_layers):
            p = f"model.layers.{layer}."
            h = self.r(h + self.self_attn(self.rms_norm(h, p + "input_layernorm.weight"), layer, cos, sin))
            h = self.r(h + self.mlp(self.rms_norm(h, p + "post_attention_layernorm.weight"), layer))
        return self.linear(self.rms_norm(h, "model.norm.weight"), self.head_name()).astype(np.float32)

    def greedy(self, prompt, n_tokens):
        """Greedy generation; ties go to the first index, as torch.argmax."""
        sequence = list(prompt)
        for _ in range(n_tokens):
            sequence.append(int(np.argmax(self.logits(sequence)[-1])))
        return sequence[len(prompt) :]


def load_peer_weights(stored):
    """What `from_pretrained(..., torch_dtype=torch.bfloat16)` holds: each stored tensor
    converted to bf16 (round to nearest even), here as f32 arrays of bf16 values."""
    return {name: round_bf16(np.asarray(v, dtype=np.float32)) for name, v in stored.items()}


# ---------------------------------------------------------------------------------------
# Running the Rust binary


class Mismatch(Exception):
    pass


def run_llama(binary, model_dir, case, logits_path, gpu):
    """Runs `llama` on the directory (`--cpu` unless `gpu`; on the GPU the binary must say
    that it runs there); returns the tokens of each sequence and the last step's logits
    [B, vocab]."""
    command = [
        str(binary), *([] if gpu else ["--cpu"]), "--weights", str(model_dir),
        "--prompt-ids", ",".join(map(str, case.prompt)),
        "--tokens", str(case.tokens), "--batch", str(case.batch), "--logits", str(logits_path),
    ]  # fmt: skip
    run = subprocess.run(command, capture_output=True, text=True)
    if run.returncode != 0:
        raise Mismatch(f"`{' '.join(command)}` failed ({run.returncode}):\n{run.stdout}{run.stderr}")
    if gpu and not any(line.startswith("backend: GPU") for line in run.stdout.splitlines()):
        raise Mismatch(f"--gpu, but the binary did not run on a GPU:\n{run.stdout}{run.stderr}")
    sequences = {}
    for line in run.stdout.splitlines():
        if line.startswith("sequence "):
            label, ids = line[len("sequence ") :].split(":", 1)
            sequences[int(label)] = [int(t) for t in ids.strip().split(",")]
    tokens = [sequences.get(b) for b in range(case.batch)]
    if any(t is None or len(t) != case.tokens for t in tokens):
        raise Mismatch(f"expected {case.batch} sequences of {case.tokens} tokens in the output:\n{run.stdout}")
    logits = np.load(logits_path)
    if logits.shape != (case.batch, SHAPES[case.shapes].config["vocab_size"]) or logits.dtype != np.float32:
        raise Mismatch(f"logits of shape {logits.shape} and dtype {logits.dtype}")
    return tokens, logits


# ---------------------------------------------------------------------------------------
# The checks


@dataclass
class Tolerance:
    """A case's bf16 noise, the largest |peer bf16 - peer f32| over all its teacher-forced
    logits, and the bounds derived from it."""

    noise: float

    @property
    def logits(self):
        return NOISE_MULTIPLE * self.noise

    @property
    def top1(self):
        return 2 * self.logits


@dataclass
class Check:
    """The worst value one check saw, and where it broke its tolerance (None: it held)."""

    worst: float
    violation: str = None


def check_teacher_forced(b, prompt_len, rust_tokens, peer_logits, tol):
    """(a): at each step the peer ranks the Rust token within tol.top1 of its best."""
    rows = peer_logits[prompt_len - 1 :]  # row s: the logits that chose token s
    gaps = rows.max(axis=1) - rows[np.arange(len(rust_tokens)), rust_tokens]
    bad = int(gaps.argmax())
    if gaps[bad] <= tol.top1:
        return Check(float(gaps[bad]))
    row, token = rows[bad], rust_tokens[bad]
    return Check(
        float(gaps[bad]),
        f"sequence {b}, step {bad} (position {prompt_len - 1 + bad}): Rust chose token {token}, peer logit "
        f"{row[token]:.4f}; the peer's best is token {int(row.argmax())} at {row.max():.4f} "
        f"(gap {gaps[bad]:.4f} > {tol.top1:.4f})",
    )


def check_last_logits(b, position, rust_row, peer_row, tol):
    """(b): the last step's logits elementwise within tol.logits."""
    diff = np.abs(rust_row - peer_row)
    i = int(diff.argmax())
    if diff[i] <= tol.logits:
        return Check(float(diff[i]))
    return Check(
        float(diff[i]),
        f"sequence {b}, last step (position {position}): logit {i} is {rust_row[i]:.4f} in Rust, "
        f"{peer_row[i]:.4f} in the peer (|diff| {diff[i]:.4f} > {tol.logits:.4f})",
    )


def greedy_agreement(peer, case, rust_tokens):
    """How many leading tokens the peer's own greedy run shares with every Rust sequence."""
    greedy = peer.greedy(case.prompt, case.tokens)
    agree = [next((i for i, (p, r) in enumerate(zip(greedy, t)) if p != r), case.tokens) for t in rust_tokens]
    return min(agree)


def write_random_model(case, model_dir):
    """Writes the case's random checkpoint; returns the stored tensors by name."""
    rng, scale = np.random.default_rng(case.seed), SHAPES[case.shapes].weight_scale
    shapes = tensor_shapes(hf_config(case))
    stored = {name: stored_values(random_tensor(name, shape, rng, scale), case.dtype) for name, shape in shapes.items()}
    model_dir.mkdir()
    write_model_dir(model_dir, case, stored)
    return stored


def check_case(case, binary, work_dir, gpu):
    """Runs one case; returns its summary line, or raises Mismatch naming what broke."""
    model_dir = work_dir / case.name
    stored = write_random_model(case, model_dir)
    rust_tokens, rust_logits = run_llama(binary, model_dir, case, work_dir / f"{case.name}.npy", gpu)

    config = parse_hf_config((model_dir / "config.json").read_text())
    weights = load_peer_weights(stored)
    peer, exact = PeerLlama(config, weights), PeerLlama(config, weights, rounding=no_rounding)
    fed = [case.prompt + tokens[:-1] for tokens in rust_tokens]
    peer_logits = [peer.logits(f) for f in fed]
    tol = Tolerance(max(float(np.abs(exact.logits(f) - p).max()) for f, p in zip(fed, peer_logits)))
    top1, last = [], []
    for b, (tokens, logits) in enumerate(zip(rust_tokens, peer_logits)):
        top1.append(check_teacher_forced(b, len(case.prompt), tokens, logits, tol))
        last.append(check_last_logits(b, case.positions - 1, rust_logits[b], logits[-1], tol))
    scale = max(float(np.abs(p[-1]).max()) for p in peer_logits)
    summary = (
        f"{case.name}: {case.tokens} tokens x {case.batch}, positions 0..{case.positions - 1}; "
        f"bf16 noise {tol.noise:.4f}; teacher-forced worst top-1 gap {max(c.worst for c in top1):.4f} "
        f"(tol {tol.top1:.4f}); last logits max|diff| {max(c.worst for c in last):.4f} "
        f"(tol {tol.logits:.4f}, scale {scale:.2f})"
    )
    violations = [c.violation for c in top1 + last if c.violation]
    if violations:
        raise Mismatch(f"{summary}\n     " + "\n     ".join(violations))
    return f"{summary}; greedy agrees {greedy_agreement(peer, case, rust_tokens)}/{case.tokens}", rust_tokens


def default_binary():
    return Path(os.environ.get("LLAMA_BIN") or REPO_ROOT / "target" / "debug" / "llama")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--llama", type=Path, default=default_binary(), help="the llama binary")
    parser.add_argument("-v", "--verbose", action="store_true", help="print the Rust tokens too")
    parser.add_argument("--gpu", action="store_true", help="run the binary on the GPU (no --cpu); it must find one")
    parser.add_argument(
        "--shapes",
        choices=["tiny", "llama-3.2-1b", "all"],
        default="tiny",
        help="tiny's cases (the default), Llama-3.2-1B's (2 layers; for --gpu with a release binary), or both",
    )
    args = parser.parse_args(argv)
    if not args.llama.is_file():
        sys.exit(f"hf_peer: no llama binary at {args.llama} (build it: cargo build -p llama)")
    cases = {"tiny": CASES, "llama-3.2-1b": CASES_1B, "all": CASES + CASES_1B}[args.shapes]
    failures = 0
    with tempfile.TemporaryDirectory(prefix="hf-peer-") as tmp:
        for case in cases:
            try:
                summary, tokens = check_case(case, args.llama, Path(tmp), args.gpu)
                print(f"ok   {summary}", flush=True)
                if args.verbose:
                    print(f"     Rust tokens: {tokens}")
            except Mismatch as e:
                failures += 1
                print(f"FAIL {e}", flush=True)
    print(f"hf_peer: {len(cases) - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
