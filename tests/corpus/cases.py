"""The real-model corpus: small Hugging Face and convolutional models, training steps and the
functions that exercise Inductor's less common codegen paths (gather/scatter, integer and bool
ops, dynamic shapes, graph breaks, in-place updates of inputs, mixed precision, RNG).

Every model is built from a config with random weights (nothing is downloaded). A case builds a
:class:`Workload`: what to compile, the inputs of each call (several for dynamic shapes), and for a
training step the loss whose backward is compiled too. ``tests/corpus/run.py`` runs cases under
one backend in a fresh process; ``tests/test_corpus.py`` and ``benchmarks/provenance_coverage.py``
compare and report them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["Workload", "CASES", "DEFAULT_CASES", "NONDETERMINISTIC", "build"]


@dataclass
class Workload:
    """One case: ``model`` compiled once and called on each of ``calls``."""

    model: Callable[..., Any]
    calls: list[tuple[Any, ...]]  # positional inputs of each call
    train: bool = False
    compile_kwargs: dict[str, Any] = field(default_factory=dict)
    # Training: the scalar whose backward is taken, from the model's output.
    loss: Optional[Callable[[Any], torch.Tensor]] = None
    kwargs: dict[str, Any] = field(default_factory=dict)  # keyword inputs of every call
    dynamo_config: dict[str, Any] = field(default_factory=dict)  # torch._dynamo.config while the calls run


CASES: dict[str, Callable[[], Workload]] = {}
# Cases where plain Inductor itself is not bit-reproducible, and why. The comparison runs plain
# Inductor twice for them: what differs between its own two runs is compared with a tolerance,
# everything else bit for bit.
NONDETERMINISTIC: dict[str, str] = {}
# The cases `make test` runs (the rest are marked slow and run with `make test-all`): every
# codegen path that text-keyed caches touch (indirect loads, training graphs) and one model each.
DEFAULT_CASES = ("gather_scatter", "int_bool", "dynamic_softmax", "graph_break", "inplace_input",
                 "mixed_precision", "dropout_rng", "bert_train", "resnet_train")


def case(name: str, *, nondeterministic: str = "") -> Callable[[Callable[[], Workload]], Callable[[], Workload]]:
    def register(builder: Callable[[], Workload]) -> Callable[[], Workload]:
        CASES[name] = builder
        if nondeterministic:
            NONDETERMINISTIC[name] = nondeterministic
        return builder
    return register


# The embedding backward scatters gradients with atomic adds from several threads: the order of
# the float additions, so the last bits of those gradients, change from run to run.
_ATOMIC_EMBEDDING = "atomic_add_vec in the embedding backward (thread order changes the float sums)"


def build(name: str) -> Workload:
    """The workload of case ``name``, with every random number drawn from seed 0."""
    if name not in CASES:
        raise KeyError(f"unknown corpus case {name!r}; known: {', '.join(CASES)}")
    torch.manual_seed(0)
    return CASES[name]()


def _mean_loss(output: Any) -> torch.Tensor:
    logits = output.logits if hasattr(output, "logits") else output
    return logits.float().pow(2).mean()


def _hf_loss(output: Any) -> torch.Tensor:
    return output.loss


# -- functions --------------------------------------------------------------------------------

def gather_scatter(src: torch.Tensor, idx: torch.Tensor, rows: torch.Tensor) -> tuple[torch.Tensor, ...]:
    gathered = torch.gather(src, 0, idx)
    scattered = torch.zeros_like(src).scatter_add(0, idx, src * 2)
    picked = src[rows] + 1
    updated = src.index_put((rows,), torch.ones(rows.shape[0], src.shape[1]), accumulate=True)
    return gathered * 2, scattered, picked, updated


@case("gather_scatter")
def _gather_scatter() -> Workload:
    src = torch.randn(12, 8)
    idx = torch.randint(0, 12, (12, 8))
    rows = torch.tensor([0, 3, 3, 7, 11])
    return Workload(gather_scatter, [(src, idx, rows)])


def int_bool(a: torch.Tensor, b: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    q = torch.div(a, b, rounding_mode="floor") + a % b
    bits = (a & 0x0F) | (b << 2)
    mask = (x > 0) & ~(a > 5)
    kept = torch.where(mask, x, torch.zeros_like(x))
    return q, bits, mask.sum(dim=-1), kept.masked_fill(~mask, -1.0), (a == b).any(dim=0)


@case("int_bool")
def _int_bool() -> Workload:
    a = torch.randint(1, 50, (16, 32))
    b = torch.randint(1, 9, (16, 32))
    return Workload(int_bool, [(a, b, torch.randn(16, 32))])


def dynamic_softmax(x: torch.Tensor) -> torch.Tensor:
    scaled = x * (x.shape[-1] ** -0.5)
    return torch.softmax(scaled, dim=-1) @ x.transpose(-1, -2)


@case("dynamic_softmax")
def _dynamic_softmax() -> Workload:
    return Workload(dynamic_softmax, [(torch.randn(2, n, n),) for n in (8, 12, 20)],
                    compile_kwargs={"dynamic": True})


def graph_break(x: torch.Tensor) -> torch.Tensor:
    y = torch.relu(x) * 2
    print("graph break here")  # Dynamo splits the function into two graphs
    return torch.tanh(y).sum(dim=0)


@case("graph_break")
def _graph_break() -> Workload:
    return Workload(graph_break, [(torch.randn(8, 16),)])


def inplace_input(x: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
    state.mul_(0.9).add_(x.mean(dim=0))
    x.clamp_(min=-1.0)
    return x * state


@case("inplace_input")
def _inplace_input() -> Workload:
    return Workload(inplace_input, [(torch.randn(8, 16), torch.randn(16))])


class MixedPrecisionMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(32, 64).to(torch.bfloat16)
        self.down = nn.Linear(64, 32).to(torch.float16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.gelu(self.up(x.to(torch.bfloat16)))
        out = self.down(h.to(torch.float16))
        return out.float().softmax(dim=-1) + x


@case("mixed_precision")
def _mixed_precision() -> Workload:
    return Workload(MixedPrecisionMLP(), [(torch.randn(8, 32),)])


class DropoutBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(32, 32)
        self.drop = nn.Dropout(0.3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        noise = torch.rand_like(x) * 0.01
        return self.drop(torch.relu(self.lin(x))) + noise


@case("dropout_rng")
def _dropout_rng() -> Workload:
    model = DropoutBlock().train()
    return Workload(model, [(torch.randn(16, 32),)], train=True, loss=_mean_loss)


# -- convolutional nets (written in torch: timm would pull a CUDA build of torchvision) -------

class BasicBlock(nn.Module):
    def __init__(self, channels_in: int, channels: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels_in, channels, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.shortcut = nn.Sequential()
        if stride != 1 or channels_in != channels:
            self.shortcut = nn.Sequential(nn.Conv2d(channels_in, channels, 1, stride, bias=False),
                                          nn.BatchNorm2d(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class TinyResNet(nn.Module):
    """ResNet-18's shape at toy width: stem, two stages of basic blocks, pool, classifier."""

    def __init__(self, width: int = 8, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        self.layer1 = BasicBlock(width, width, 1)
        self.layer2 = BasicBlock(width, 2 * width, 2)
        self.fc = nn.Linear(2 * width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layer2(self.layer1(self.stem(x)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class InvertedResidual(nn.Module):
    """MobileNetV3's block: expand, depthwise conv, squeeze-excite, project, hardswish."""

    def __init__(self, channels: int, expand: int) -> None:
        super().__init__()
        hidden = channels * expand
        self.expand = nn.Sequential(nn.Conv2d(channels, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.Hardswish())
        self.depthwise = nn.Sequential(nn.Conv2d(hidden, hidden, 3, 1, 1, groups=hidden, bias=False),
                                       nn.BatchNorm2d(hidden), nn.Hardswish())
        self.squeeze = nn.Conv2d(hidden, hidden // 4, 1)
        self.excite = nn.Conv2d(hidden // 4, hidden, 1)
        self.project = nn.Sequential(nn.Conv2d(hidden, channels, 1, bias=False), nn.BatchNorm2d(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.depthwise(self.expand(x))
        scale = F.hardsigmoid(self.excite(F.relu(self.squeeze(F.adaptive_avg_pool2d(h, 1)))))
        return x + self.project(h * scale)


class TinyMobileNet(nn.Module):
    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.Hardswish())
        self.blocks = nn.Sequential(InvertedResidual(8, 4), InvertedResidual(8, 3))
        self.head = nn.Linear(8, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.blocks(self.stem(x))
        return self.head(x.mean(dim=(2, 3)))


@case("resnet")
def _resnet() -> Workload:
    return Workload(TinyResNet().eval(), [(torch.randn(2, 3, 16, 16),)])


@case("resnet_train")
def _resnet_train() -> Workload:
    return Workload(TinyResNet().train(), [(torch.randn(4, 3, 16, 16),)], train=True, loss=_mean_loss)


@case("mobilenet")
def _mobilenet() -> Workload:
    return Workload(TinyMobileNet().eval(), [(torch.randn(2, 3, 16, 16),)])


@case("sequential_bn_train")
def _sequential_bn_train() -> Workload:
    """Only torch's own modules: Dynamo records no user frame for any node (it leaves out frames
    inside torch/nn/modules), so every source line is a module's ``forward``."""
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(8, 16, 3, groups=2), nn.BatchNorm2d(16), nn.SiLU(), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(16, 4)).train()
    return Workload(model, [(torch.randn(4, 3, 16, 16),)], train=True, loss=_mean_loss)


# -- Hugging Face transformers (small configs, random weights) ----------------------------------

_TINY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)


def _tokens(batch: int = 2, length: int = 16, vocab: int = 128) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, length))


def _language_model(config_class: str, model_class: str, train: bool, **config: Any) -> Workload:
    """A transformers language model from a small config: a token batch, or a training step on it
    (the labels are the tokens: the model's own loss is the one backpropagated)."""
    import transformers

    model = getattr(transformers, model_class)(getattr(transformers, config_class)(**config)).train(train)
    ids = _tokens()
    if train:
        return Workload(model, [()], train=True, loss=_hf_loss, kwargs={"input_ids": ids, "labels": ids})
    return Workload(model, [(ids,)])


_BERT = dict(vocab_size=128, max_position_embeddings=64, **_TINY)
_GPT2 = dict(vocab_size=128, n_positions=64, n_embd=32, n_layer=2, n_head=2, bos_token_id=0, eos_token_id=0)
_LLAMA = dict(vocab_size=128, max_position_embeddings=64, num_key_value_heads=1, **_TINY)


@case("bert")
def _bert_inference() -> Workload:
    return _language_model("BertConfig", "BertForMaskedLM", False, **_BERT)


@case("bert_train", nondeterministic=_ATOMIC_EMBEDDING)
def _bert_train() -> Workload:
    return _language_model("BertConfig", "BertForMaskedLM", True, **_BERT)


@case("gpt2")
def _gpt2_inference() -> Workload:
    return _language_model("GPT2Config", "GPT2LMHeadModel", False, **_GPT2)


@case("gpt2_train", nondeterministic=_ATOMIC_EMBEDDING)
def _gpt2_train() -> Workload:
    return _language_model("GPT2Config", "GPT2LMHeadModel", True, **_GPT2)


@case("llama")
def _llama_inference() -> Workload:
    return _language_model("LlamaConfig", "LlamaForCausalLM", False, **_LLAMA)


@case("llama_train", nondeterministic=_ATOMIC_EMBEDDING)
def _llama_train() -> Workload:
    return _language_model("LlamaConfig", "LlamaForCausalLM", True, **_LLAMA)


@case("t5")
def _t5() -> Workload:
    from transformers import T5Config, T5ForConditionalGeneration

    config = T5Config(vocab_size=128, d_model=32, d_kv=16, d_ff=64, num_layers=2, num_decoder_layers=2,
                      num_heads=2, decoder_start_token_id=0)
    model = T5ForConditionalGeneration(config).eval()
    return Workload(model, [()], kwargs={"input_ids": _tokens(), "decoder_input_ids": _tokens(length=8)})


@case("vit")
def _vit() -> Workload:
    from transformers import ViTConfig, ViTForImageClassification

    config = ViTConfig(image_size=32, patch_size=8, num_channels=3, num_labels=10, **_TINY)
    return Workload(ViTForImageClassification(config).eval(), [(torch.randn(2, 3, 32, 32),)])


@case("opt")
def _opt() -> Workload:
    return _language_model("OPTConfig", "OPTForCausalLM", False, vocab_size=128, max_position_embeddings=64,
                           hidden_size=32, num_hidden_layers=2, ffn_dim=64, num_attention_heads=2,
                           word_embed_proj_dim=32)


@case("mistral_train", nondeterministic=_ATOMIC_EMBEDDING)
def _mistral_train() -> Workload:
    return _language_model("MistralConfig", "MistralForCausalLM", True, vocab_size=128, max_position_embeddings=64,
                           num_key_value_heads=1, sliding_window=8, **_TINY)


@case("mixtral_train", nondeterministic=_ATOMIC_EMBEDDING)
def _mixtral_train() -> Workload:
    """A mixture of experts: top-k routing, each expert's tokens picked out and added back."""
    return _language_model("MixtralConfig", "MixtralForCausalLM", True, vocab_size=128, max_position_embeddings=64,
                           num_key_value_heads=1, num_local_experts=4, num_experts_per_tok=2, **_TINY)


@case("wav2vec2")
def _wav2vec2() -> Workload:
    """Audio: a strided 1-d convolution stack, group norm, a grouped positional convolution."""
    from transformers import Wav2Vec2Config, Wav2Vec2Model

    config = Wav2Vec2Config(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                            conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16,
                            num_conv_pos_embedding_groups=4)
    return Workload(Wav2Vec2Model(config).eval(), [(torch.randn(2, 1600),)])


@case("convnext")
def _convnext() -> Workload:
    from transformers import ConvNextConfig, ConvNextForImageClassification

    config = ConvNextConfig(num_channels=3, num_stages=2, hidden_sizes=[8, 16], depths=[1, 1], num_labels=5)
    return Workload(ConvNextForImageClassification(config).eval(), [(torch.randn(2, 3, 32, 32),)])


@case("gpt2_dynamic")
def _gpt2_dynamic() -> Workload:
    """Three sequence lengths under ``dynamic=True``: symbolic sizes through a whole model."""
    import transformers

    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(**_GPT2)).eval()
    return Workload(model, [(_tokens(length=8),), (_tokens(length=12),), (_tokens(length=20),)],
                    compile_kwargs={"dynamic": True})


@case("qwen2_train", nondeterministic=_ATOMIC_EMBEDDING)
def _qwen2_train() -> Workload:
    return _language_model("Qwen2Config", "Qwen2ForCausalLM", True, vocab_size=128, max_position_embeddings=64,
                           num_key_value_heads=1, **_TINY)


@case("bart")
def _bart() -> Workload:
    from transformers import BartConfig, BartForConditionalGeneration

    config = BartConfig(vocab_size=128, d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                        decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64)
    model = BartForConditionalGeneration(config).eval()
    return Workload(model, [()], kwargs={"input_ids": _tokens(), "decoder_input_ids": _tokens(length=8)})


@case("swin")
def _swin() -> Workload:
    from transformers import SwinConfig, SwinForImageClassification

    config = SwinConfig(image_size=32, patch_size=4, num_channels=3, embed_dim=16, depths=[1, 1], num_heads=[2, 2],
                        window_size=4, num_labels=5)
    return Workload(SwinForImageClassification(config).eval(), [(torch.randn(2, 3, 32, 32),)])


@case("distilbert_train", nondeterministic=_ATOMIC_EMBEDDING)
def _distilbert_train() -> Workload:
    return _language_model("DistilBertConfig", "DistilBertForMaskedLM", True, vocab_size=128,
                           max_position_embeddings=64, dim=32, n_layers=2, n_heads=2, hidden_dim=64)


# -- more models and codegen paths: norms, upsampling, scans and sorts, autocast, encoder-decoders --

class TinyUNet(nn.Module):
    """Encoder-decoder: group and instance norm, max pool, transposed conv, bilinear upsampling, skip concat."""

    def __init__(self) -> None:
        super().__init__()
        self.down = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.GroupNorm(2, 8), nn.SiLU())
        self.pool = nn.MaxPool2d(2)
        self.mid = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1), nn.InstanceNorm2d(16, affine=True), nn.LeakyReLU(0.1))
        self.up = nn.ConvTranspose2d(16, 8, 2, stride=2)
        self.out = nn.Conv2d(16, 2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d = self.down(x)
        m = self.mid(self.pool(d))
        u = self.up(m) + F.interpolate(m[:, :8], scale_factor=2, mode="bilinear", align_corners=False)
        return self.out(torch.cat([u, d], dim=1))


@case("unet_train")
def _unet_train() -> Workload:
    return Workload(TinyUNet().train(), [(torch.randn(2, 3, 16, 16),)], train=True, loss=_mean_loss)


def scan_sort_ops(x: torch.Tensor, idx: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Scans, sorts, top-k, scatter-reduce, Welford reductions, embedding bags, bucketize, NaN handling."""
    c = torch.cumsum(x, dim=1)
    top = torch.topk(x, 3, dim=1).values
    s = torch.sort(x, dim=1, descending=True).values[:, :2]
    am = torch.argmax(x, dim=1)
    red = torch.zeros(4, x.shape[1]).scatter_reduce(0, idx, x, reduce="amax", include_self=False)
    lse = torch.logsumexp(x, dim=1)
    var, mean = torch.var_mean(x, dim=0, correction=1)
    bag = F.embedding_bag(idx[:, :3].reshape(-1) % w.shape[0], w, torch.arange(0, idx.shape[0] * 3, 3), mode="sum")
    b = torch.bucketize(x, torch.tensor([-1.0, 0.0, 1.0]))
    nanny = torch.where(x > 1.5, torch.full_like(x, float("nan")), x).nan_to_num(0.0)
    return c, top, s, am, red, lse, var + mean, bag, b, nanny.pow(3), torch.remainder(x, 0.7)


@case("scan_sort_ops")
def _scan_sort_ops() -> Workload:
    x = torch.randn(8, 10)
    idx = torch.randint(0, 4, (8, 10))
    return Workload(scan_sort_ops, [(x, idx, torch.randn(20, 6))])


@case("torch_transformer_train")
def _torch_transformer_train() -> Workload:
    layer = nn.TransformerEncoderLayer(32, 2, 64, dropout=0.0, batch_first=True, norm_first=True)
    model = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).train()
    return Workload(model, [(torch.randn(2, 10, 32),)], train=True, loss=_mean_loss)


@case("gpt2_dynamic_train", nondeterministic=_ATOMIC_EMBEDDING)
def _gpt2_dynamic_train() -> Workload:
    import transformers

    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(**_GPT2)).train()
    return Workload(model, [(_tokens(length=8),), (_tokens(length=12),)], train=True, loss=_mean_loss,
                    compile_kwargs={"dynamic": True})


@case("whisper")
def _whisper() -> Workload:
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    config = WhisperConfig(vocab_size=128, num_mel_bins=8, encoder_layers=1, decoder_layers=1, d_model=32,
                           encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                           decoder_ffn_dim=64, max_source_positions=16, max_target_positions=16,
                           pad_token_id=0, bos_token_id=0, eos_token_id=0, decoder_start_token_id=0)
    model = WhisperForConditionalGeneration(config).eval()
    return Workload(model, [()], kwargs={"input_features": torch.randn(2, 8, 32),
                                         "decoder_input_ids": _tokens(length=6)})


@case("deberta_train", nondeterministic=_ATOMIC_EMBEDDING)
def _deberta_train() -> Workload:
    return _language_model("DebertaV2Config", "DebertaV2ForMaskedLM", True, vocab_size=128,
                           max_position_embeddings=64, relative_attention=True, position_buckets=8,
                           pos_att_type=["p2c", "c2p"], **_TINY)


@case("clip_text")
def _clip_text() -> Workload:
    from transformers import CLIPTextConfig, CLIPTextModel

    config = CLIPTextConfig(vocab_size=128, max_position_embeddings=32, **_TINY)
    return Workload(CLIPTextModel(config).eval(), [(_tokens(),)])


class AutocastMLP(nn.Module):
    """A bfloat16 autocast region inside the model: casts in and out of it, in a training step."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(16, 32)
        self.b = nn.Linear(32, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            h = F.gelu(self.a(x))
            return self.b(h).float().log_softmax(-1)


@case("autocast_train")
def _autocast_train() -> Workload:
    return Workload(AutocastMLP().train(), [(torch.randn(6, 16),)], train=True, loss=_mean_loss)


@case("compiled_adamw")
def _compiled_adamw() -> Workload:
    """A compiled optimizer step: AdamW's foreach updates of every parameter and its state, in place."""
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 8))
    for p in model.parameters():
        p.grad = torch.randn_like(p)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, foreach=True)
    params = list(model.parameters())

    def step() -> list[torch.Tensor]:
        opt.step()
        return [p.detach().clone() for p in params]
    return Workload(step, [(), ()])


class CheckpointNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(nn.Sequential(nn.LayerNorm(32), nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 32))
                                    for _ in range(2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = x + torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)
        return torch.tanh(x)


@case("checkpoint_train")
def _checkpoint_train() -> Workload:
    """Activation checkpointing: each block a Dynamo subgraph, recomputed in the backward."""
    return Workload(CheckpointNet().train(), [(torch.randn(4, 8, 32),)], train=True, loss=_mean_loss)


def flex(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    from torch.nn.attention.flex_attention import flex_attention

    def causal_bias(score, b, h, qi, kv):
        return torch.where(qi >= kv, score + (qi - kv) * -0.1, -float("inf"))
    return flex_attention(q, k, v, score_mod=causal_bias)


@case("flex_attention")
def _flex_attention() -> Workload:
    """flex_attention with a score modification: a templated attention kernel on the CPU."""
    return Workload(flex, [tuple(torch.randn(1, 2, 16, 8) for _ in range(3))])


def cond_fn(x: torch.Tensor, flag: torch.Tensor) -> torch.Tensor:
    return torch.cond(flag.sum() > 0, lambda t: torch.sin(t) * 2, lambda t: torch.cos(t) - 1, (x,)) + x


@case("cond")
def _cond() -> Workload:
    """torch.cond: both branches lowered as subgraphs, each call taking one."""
    return Workload(cond_fn, [(torch.randn(8, 8), torch.ones(2)), (torch.randn(8, 8), -torch.ones(2))])


def _rope(x: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    rotated = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2)) * freqs
    return torch.view_as_real(rotated).flatten(-2).type_as(x)


class ComplexRopeAttention(nn.Module):
    """Rotary embeddings through complex numbers (Llama's original code): complex ops fall back."""

    def __init__(self, dim: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, -1).unbind(2)
        q, k = _rope(q, freqs), _rope(k, freqs)
        a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        return self.out(F.silu(a.transpose(1, 2).reshape(b, t, d)))


@case("complex_rope_train")
def _complex_rope_train() -> Workload:
    t = 16
    theta = 1.0 / (10000 ** (torch.arange(0, 8, 2).float() / 8))
    freqs = torch.polar(torch.ones(t, 4), torch.outer(torch.arange(t).float(), theta))[:, None, :]
    return Workload(ComplexRopeAttention().train(), [(torch.randn(2, t, 32), freqs)], train=True, loss=_mean_loss)


class SamplingNet(nn.Module):
    """Spatial-transformer-style ops: grid_sample, unfold, pixel_shuffle, ceil-mode pooling."""

    def __init__(self) -> None:
        super().__init__()
        self.theta = nn.Linear(12, 6)
        self.conv = nn.Conv2d(3, 12, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        theta = self.theta(x.mean(dim=(2, 3)).repeat(1, 4)).view(-1, 2, 3)
        grid = F.affine_grid(theta, list(x.shape), align_corners=False)
        warped = F.grid_sample(x, grid, align_corners=False, padding_mode="border")
        patches = F.unfold(warped, 2, stride=2).transpose(1, 2)
        shuffled = F.pixel_shuffle(self.conv(warped), 2)
        pooled = F.avg_pool2d(shuffled, 3, stride=2, ceil_mode=True)
        return patches.softmax(-1).sum() + F.adaptive_max_pool2d(pooled, 5).square().mean()


@case("sampling_train")
def _sampling_train() -> Workload:
    return Workload(SamplingNet().train(), [(torch.randn(2, 3, 10, 10),)], train=True, loss=_mean_loss)


def special_fns(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Rare pointwise math: erfinv, lgamma, digamma, i0, log1p/expm1, atan2, hypot, frexp, copysign."""
    u = torch.sigmoid(x) * 0.98 + 0.01
    mantissa, exponent = torch.frexp(y)
    normal = torch.distributions.Normal(x, y.abs() + 0.5)
    return (torch.erfinv(2 * u - 1), torch.lgamma(y.abs() + 0.1), torch.digamma(y.abs() + 0.5),
            torch.special.i0(x), torch.log1p(u) - torch.expm1(-u), torch.atan2(x, y), torch.hypot(x, y),
            mantissa * exponent, torch.copysign(x, y), normal.log_prob(y), torch.special.xlogy(u, y.abs()))


@case("special_fns")
def _special_fns() -> Workload:
    return Workload(special_fns, [(torch.randn(7, 33), torch.randn(7, 33))])


@case("conv_dynamic")
def _conv_dynamic() -> Workload:
    """A conv net compiled with dynamic=True, called with three batch and image sizes."""
    return Workload(TinyResNet().eval(), [(torch.randn(2, 3, 16, 16),), (torch.randn(3, 3, 20, 20),),
                                          (torch.randn(1, 3, 12, 18),)], compile_kwargs={"dynamic": True})


@case("mamba_train")
def _mamba_train() -> Workload:
    """A state-space model's training step: the reference selective scan (a Python loop over the
    sequence, unrolled by Dynamo), a causal depthwise convolution, softplus."""
    return _language_model("MambaConfig", "MambaForCausalLM", True, vocab_size=128, hidden_size=32,
                           num_hidden_layers=2, state_size=4, expand=2, conv_kernel=4, use_cache=False)


@case("gemma2_train", nondeterministic=_ATOMIC_EMBEDDING)
def _gemma2_train() -> Workload:
    """Gemma-2's training step: attention logits soft-capped with tanh, a sliding window, GQA."""
    return _language_model("Gemma2Config", "Gemma2ForCausalLM", True, vocab_size=128, hidden_size=32,
                           num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                           intermediate_size=64, max_position_embeddings=64, sliding_window=8,
                           attn_implementation="eager")


class PerSampleGrads(nn.Module):
    """torch.func: per-sample gradients of a small MLP, ``vmap(grad(loss))`` over the batch."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        params = {name: p.detach() for name, p in self.net.named_parameters()}

        def loss(p: dict[str, torch.Tensor], xi: torch.Tensor, yi: torch.Tensor) -> torch.Tensor:
            out = torch.func.functional_call(self.net, p, (xi.unsqueeze(0),))
            return F.cross_entropy(out, yi.unsqueeze(0))

        grads = torch.func.vmap(torch.func.grad(loss), in_dims=(None, 0, 0))(params, x, y)
        return tuple(grads[name] for name in sorted(grads))


@case("per_sample_grads")
def _per_sample_grads() -> Workload:
    return Workload(PerSampleGrads(), [(torch.randn(6, 8), torch.randint(0, 3, (6,)))])


# -- data-dependent sizes, custom autograd, fallbacks and more attention layouts ---------------

def unbacked_fn(x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
    n = int(mask.sum().item())
    picked = x[mask.nonzero().squeeze(1)]
    head = x[:n] * 2
    return picked.tanh().sum(0), head.exp(), torch.arange(n) * 3


@case("unbacked")
def _unbacked() -> Workload:
    """Data-dependent sizes as unbacked symbols (``.item()``, ``nonzero``): two masks of other
    counts through one graph."""
    mask = torch.tensor([1, 0, 1, 1, 0, 0, 1, 0], dtype=torch.bool)
    return Workload(unbacked_fn, [(torch.randn(8, 5), mask), (torch.randn(8, 5), ~mask)],
                    dynamo_config={"capture_scalar_outputs": True, "capture_dynamic_output_shape_ops": True})


@case("albert_train", nondeterministic=_ATOMIC_EMBEDDING)
def _albert_train() -> Workload:
    """ALBERT's training step: one layer's weights shared by every layer, a factorized embedding."""
    return _language_model("AlbertConfig", "AlbertForMaskedLM", True, vocab_size=128, embedding_size=16,
                           max_position_embeddings=64, **_TINY)


@case("xlnet")
def _xlnet() -> Workload:
    """XLNet: relative attention written as einsums, with a shift of the position scores."""
    import transformers

    config = transformers.XLNetConfig(vocab_size=128, d_model=32, n_layer=2, n_head=2, d_inner=64)
    return Workload(transformers.XLNetLMHeadModel(config).eval(), [(_tokens(),)])


@case("longformer")
def _longformer() -> Workload:
    """Longformer: sliding-window attention over overlapping chunks made with ``as_strided``, pads
    and diagonal shifts."""
    import transformers

    config = transformers.LongformerConfig(vocab_size=128, max_position_embeddings=80, attention_window=[8, 8],
                                           **_TINY)
    return Workload(transformers.LongformerModel(config).eval(), [(_tokens(length=32),)])


class LinalgNet(nn.Module):
    """Linear algebra Inductor runs as ATen fallbacks, forward and backward."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(6, 6)

    def forward(self, x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a = self.lin(x)
        spd = a @ a.transpose(-1, -2) + 6 * torch.eye(6)
        chol = torch.linalg.cholesky(spd)
        solution = torch.linalg.solve(spd, b)
        return chol.sum() + solution.square().mean() + torch.logdet(spd).sum()


@case("linalg_train")
def _linalg_train() -> Workload:
    return Workload(LinalgNet(), [(torch.randn(3, 6, 6), torch.randn(3, 6, 2))], train=True, loss=_mean_loss)


class MultiheadAttentionNet(nn.Module):
    """torch's MultiheadAttention with a key padding mask and its weights returned, then a
    weight-normalized linear (a parametrization)."""

    def __init__(self) -> None:
        super().__init__()
        self.mha = nn.MultiheadAttention(16, 4, batch_first=True)
        self.out = torch.nn.utils.parametrizations.weight_norm(nn.Linear(16, 16))

    def forward(self, x: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        attended, weights = self.mha(x, x, x, key_padding_mask=pad, need_weights=True)
        return self.out(attended).relu().mean() + weights.amax()


@case("mha_train")
def _mha_train() -> Workload:
    pad = torch.zeros(2, 7, dtype=torch.bool)
    pad[1, 5:] = True
    return Workload(MultiheadAttentionNet().train(), [(torch.randn(2, 7, 16), pad)], train=True, loss=_mean_loss)


class CtcNet(nn.Module):
    """CTC loss (a fallback with its own backward) and ``index_put`` with accumulation."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 5)

    def forward(self, x: torch.Tensor, targets: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        logp = self.proj(x).log_softmax(-1)
        loss = F.ctc_loss(logp, targets, [10, 10], [3, 2])
        accumulated = torch.zeros(4, 5).index_put((idx,), logp[:6, 0], accumulate=True)
        return loss + accumulated.square().sum()


@case("ctc_train")
def _ctc_train() -> Workload:
    return Workload(CtcNet(), [(torch.randn(10, 2, 8), torch.tensor([[1, 2, 3], [2, 4, 0]]),
                                torch.tensor([0, 1, 1, 3, 0, 2]))], train=True, loss=_mean_loss)


class RoundSTE(torch.autograd.Function):
    """Rounding with a straight-through gradient, clipped: a custom backward unlike the forward."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, scale: float) -> torch.Tensor:
        ctx.save_for_backward(x)
        return torch.round(x * scale) / scale

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        (x,) = ctx.saved_tensors
        return grad * (x.abs() < 2).to(grad.dtype), None


class SigmoidGelu(torch.autograd.Function):
    """GELU's sigmoid approximation with a hand-written derivative."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return x * torch.sigmoid(1.702 * x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(1.702 * x)
        return grad * (s + 1.702 * x * s * (1 - s))


class FunctionNet(nn.Module):
    """Custom autograd Functions, a forward hook that rescales a module's output, and a buffer
    updated under ``no_grad`` inside the forward (an exponential moving average)."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(12, 24)
        self.b = nn.Linear(24, 6)
        self.register_buffer("ema", torch.zeros(24))
        self.a.register_forward_hook(lambda module, inputs, output: output * 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = SigmoidGelu.apply(self.a(x))
        with torch.no_grad():
            self.ema.mul_(0.9).add_(h.mean(0), alpha=0.1)
        return self.b(RoundSTE.apply(h, 8.0) - self.ema)


@case("autograd_function_train")
def _autograd_function_train() -> Workload:
    return Workload(FunctionNet(), [(torch.randn(5, 12),), (torch.randn(5, 12),)], train=True, loss=_mean_loss)


class Int8WeightOnlyLinear(nn.Module):
    """Weight-only int8 quantization as users write it: an int8 weight cast to the activation's
    dtype, then scaled per output channel (Inductor's pattern for ``_weight_int8pack_mm``)."""

    def __init__(self) -> None:
        super().__init__()
        w = torch.randn(32, 48)
        self.scale = nn.Parameter(w.abs().amax(1) / 127, requires_grad=False)
        self.register_buffer("w8", torch.round(w / self.scale[:, None]).to(torch.int8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (F.linear(x, self.w8.to(x.dtype)) * self.scale.to(x.dtype)).relu()


@case("int8_weight_only")
def _int8_weight_only() -> Workload:
    return Workload(Int8WeightOnlyLinear().eval(), [(torch.randn(4, 48).to(torch.bfloat16),)])


@torch.compiler.disable
def _eager_island(x: torch.Tensor) -> torch.Tensor:
    return x.cumsum(0)


class EagerIslandNet(nn.Module):
    """A function under ``torch.compiler.disable`` between two compiled regions, in training."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(_eager_island(self.lin(x).sin())).cos()


@case("disable_island_train")
def _disable_island_train() -> Workload:
    return Workload(EagerIslandNet(), [(torch.randn(4, 8),)], train=True, loss=_mean_loss)


@case("scalar_codegen_train")
def _scalar_codegen_train() -> Workload:
    """The ResNet's training step with vectorization off (``cpp.simdlen=0``, passed as a compile
    option): every C++ kernel takes the scalar path, as on a CPU with no vector ISA Inductor supports."""
    return Workload(TinyResNet().train(), [(torch.randn(4, 3, 16, 16),)], train=True, loss=_mean_loss,
                    compile_kwargs={"options": {"cpp.simdlen": 0}})
