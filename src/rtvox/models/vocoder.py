"""HiFi-GAN generator (Kong et al. 2020): log-mel [B, 80, T] -> waveform [B, T * HOP_LENGTH] in [-1, 1].

    mel ─conv_pre─► [leaky ReLU ─► transposed conv (×rate) ─► MRF] × stages ─► leaky ReLU ─► conv_post ─► tanh

MRF (multi-receptive-field fusion) averages parallel residual blocks with different kernels and dilations.
Each upsampling stage halves the channels; the product of the upsampling rates is exactly HOP_LENGTH, so frame
t of the mel maps to samples [t * 256, (t + 1) * 256).

Weight norm: training builds `HiFiGAN(config, weight_norm=True)` (torch parametrizations);
`remove_weight_norm()` folds it into plain weights. Shipped weights are always plain (see
`inference_state_dict`), and the bundle loads them into `HiFiGAN(config)` with weight_norm=False. The
multi-period and multi-scale discriminators belong to the training recipe and are not here yet.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils import parametrize
from torch.nn.utils.parametrizations import weight_norm as apply_weight_norm

from rtvox.constants import HOP_LENGTH, N_MELS
from rtvox.errors import InputError, ModelError
from rtvox.models.acoustic import MEL_PAD_VALUE
from rtvox.models.layers import config_from_dict, config_to_dict
from rtvox.models.vocos import Vocos, VocosConfig

LRELU_SLOPE = 0.1  # between layers, as in the reference HiFi-GAN


@dataclass(frozen=True)
class VocoderConfig:
    """HiFi-GAN generator hyper-parameters; stored under "vocoder" in the model's config.json."""

    family: str = "hifigan"
    n_mels: int = N_MELS
    initial_channels: int = 512
    upsample_rates: tuple[int, ...] = (8, 8, 2, 2)  # product must equal HOP_LENGTH
    upsample_kernels: tuple[int, ...] = (16, 16, 4, 4)  # kernel - rate must be even (exact length)
    resblock_kernels: tuple[int, ...] = (3, 7, 11)
    resblock_dilations: tuple[tuple[int, ...], ...] = ((1, 3, 5), (1, 3, 5), (1, 3, 5))

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "v1": {},  # ~13.9M parameters, the reference quality setting
        "light": dict(initial_channels=128),  # ~0.9M parameters (HiFi-GAN V2): CPU / low-latency
        "tiny": dict(  # ~20k parameters: unit tests
            initial_channels=16,
            upsample_rates=(8, 8, 4),
            upsample_kernels=(16, 16, 8),
            resblock_kernels=(3,),
            resblock_dilations=((1, 3),),
        ),
    }

    def __post_init__(self) -> None:
        if self.family != "hifigan":
            raise ValueError(f"VocoderConfig.family must be 'hifigan', got {self.family!r}")
        if math.prod(self.upsample_rates) != HOP_LENGTH:
            raise ValueError(
                f"upsample_rates {self.upsample_rates} multiply to {math.prod(self.upsample_rates)}, "
                f"not HOP_LENGTH={HOP_LENGTH}"
            )
        if len(self.upsample_kernels) != len(self.upsample_rates) or any(
            (k - r) % 2 or k < r for k, r in zip(self.upsample_kernels, self.upsample_rates, strict=True)
        ):
            raise ValueError("each upsample kernel must be >= its rate with an even difference")
        if len(self.resblock_kernels) != len(self.resblock_dilations):
            raise ValueError("resblock_kernels and resblock_dilations must have the same length")
        if self.initial_channels % 2 ** len(self.upsample_rates):
            raise ValueError("initial_channels must stay an integer after halving at every stage")

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> VocoderConfig:
        if name not in cls.PRESETS:
            raise InputError(f"unknown vocoder preset {name!r}; one of {', '.join(cls.PRESETS)}")
        return cls(**{**cls.PRESETS[name], **overrides})

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> VocoderConfig:
        return config_from_dict(cls, data, "vocoder")

    def to_dict(self) -> dict[str, Any]:
        return config_to_dict(self)

    @property
    def receptive_field_frames(self) -> int:
        """One-sided receptive field in mel frames (an upper bound, rounded up).

        Summed layer by layer, each converted to frames at the sample rate of that layer: conv_pre (kernel 7),
        per stage the transposed conv (kernel k, rate r, padding (k - r) / 2 reaches (k + r - 2) / (2r) input
        samples) and the widest MRF branch (per dilation d: d (K - 1) / 2 + (K - 1) / 2 samples), then conv_post
        (kernel 7).
        """
        frames = 3.0  # conv_pre, kernel 7, at 1 sample per frame
        per_frame = 1  # samples per frame at the current layer
        for rate, kernel in zip(self.upsample_rates, self.upsample_kernels, strict=True):
            frames += (kernel + rate - 2) / (2 * rate) / per_frame
            per_frame *= rate
            mrf = max(
                sum((d + 1) * (k - 1) // 2 for d in dilations)
                for k, dilations in zip(self.resblock_kernels, self.resblock_dilations, strict=True)
            )
            frames += mrf / per_frame
        frames += 3 / per_frame  # conv_post, kernel 7, at full rate
        return math.ceil(frames)


def _conv(c_in: int, c_out: int, kernel: int, dilation: int = 1) -> nn.Conv1d:
    # 'same' padding for odd kernels at any dilation
    return nn.Conv1d(c_in, c_out, kernel, dilation=dilation, padding=dilation * (kernel - 1) // 2)


class ResBlock(nn.Module):
    """HiFi-GAN ResBlock1: for each dilation d, x += conv_1(lrelu(conv_d(lrelu(x))))."""

    def __init__(self, channels: int, kernel: int, dilations: tuple[int, ...]) -> None:
        super().__init__()
        self.convs1 = nn.ModuleList([_conv(channels, channels, kernel, d) for d in dilations])
        self.convs2 = nn.ModuleList([_conv(channels, channels, kernel) for _ in dilations])

    def forward(self, x: Tensor) -> Tensor:
        # x: [B, C, L] -> [B, C, L]
        for c1, c2 in zip(self.convs1, self.convs2, strict=True):
            x = x + c2(F.leaky_relu(c1(F.leaky_relu(x, LRELU_SLOPE)), LRELU_SLOPE))
        return x


class HiFiGAN(nn.Module):
    """HiFi-GAN generator. Owns the conv stack; `forward` is export-clean with a dynamic frame axis."""

    def __init__(self, config: VocoderConfig, *, weight_norm: bool = False) -> None:
        super().__init__()
        self.config = cfg = config
        self.conv_pre = _conv(cfg.n_mels, cfg.initial_channels, 7)
        self.ups = nn.ModuleList()
        self.resblocks = nn.ModuleList()
        channels = cfg.initial_channels
        for rate, kernel in zip(cfg.upsample_rates, cfg.upsample_kernels, strict=True):
            self.ups.append(nn.ConvTranspose1d(channels, channels // 2, kernel, rate, padding=(kernel - rate) // 2))
            channels //= 2
            for k, dilations in zip(cfg.resblock_kernels, cfg.resblock_dilations, strict=True):
                self.resblocks.append(ResBlock(channels, k, dilations))
        self.conv_post = _conv(channels, 1, 7)
        self.n_kernels = len(cfg.resblock_kernels)
        for module in self.modules():
            if isinstance(module, nn.Conv1d | nn.ConvTranspose1d):
                nn.init.normal_(module.weight, 0.0, 0.01)  # the reference initialization
                if weight_norm:
                    apply_weight_norm(module)

    def forward(self, mel: Tensor) -> Tensor:
        # mel: [B, n_mels, T] -> wav: [B, T * HOP_LENGTH] in [-1, 1]
        x = self.conv_pre(mel)  # [B, C, T]
        for i, up in enumerate(self.ups):
            x = up(F.leaky_relu(x, LRELU_SLOPE))  # [B, C / 2^(i+1), T * prod(rates[:i+1])]
            blocks = self.resblocks[i * self.n_kernels : (i + 1) * self.n_kernels]
            mrf = blocks[0](x)
            for block in blocks[1:]:
                mrf = mrf + block(x)
            x = mrf / self.n_kernels
        # The reference uses leaky_relu's default slope (0.01) here, not LRELU_SLOPE.
        x = self.conv_post(F.leaky_relu(x))  # [B, 1, T * HOP_LENGTH]
        return x.squeeze(1).tanh()

    @property
    def has_weight_norm(self) -> bool:
        return any(parametrize.is_parametrized(m) for m in self.modules())

    def remove_weight_norm(self) -> HiFiGAN:
        """Fold weight norm into plain weights (in place) for inference and export; returns self."""
        for module in self.modules():
            if parametrize.is_parametrized(module, "weight"):
                parametrize.remove_parametrizations(module, "weight", leave_parametrized=True)
        return self

    def inference_state_dict(self) -> dict[str, Tensor]:
        """State dict with plain `weight` keys, with or without weight norm applied (what a bundle stores)."""
        state = {k: v.detach() for k, v in self.state_dict().items() if ".parametrizations." not in k}
        for name, module in self.named_modules():
            if parametrize.is_parametrized(module, "weight"):
                state[f"{name}.weight"] = module.weight.detach()  # evaluates g * v / |v|
        return state


# ---------------------------------------------------------------------------------------------- families
AnyVocoderConfig = VocoderConfig | VocosConfig
AnyVocoder = HiFiGAN | Vocos
VOCODER_FAMILIES: dict[str, type[VocoderConfig] | type[VocosConfig]] = {"hifigan": VocoderConfig, "vocos": VocosConfig}


def vocoder_preset(name: str) -> AnyVocoderConfig:
    """A vocoder config by preset name: HiFi-GAN's "v1" / "light" / "tiny", or "vocos-<preset>"."""
    if name.startswith("vocos-"):
        return VocosConfig.preset(name.removeprefix("vocos-"))
    return VocoderConfig.preset(name)


def vocoder_config_from_dict(data: dict[str, Any]) -> AnyVocoderConfig:
    """The config of whichever family `data["family"]` names (absent: HiFi-GAN, the first format)."""
    family = data.get("family", "hifigan")
    if family not in VOCODER_FAMILIES:
        raise ModelError(f"unknown vocoder family {family!r} in config.json; one of {', '.join(VOCODER_FAMILIES)}")
    return VOCODER_FAMILIES[family].from_dict(data)


def build_vocoder(config: AnyVocoderConfig) -> AnyVocoder:
    """An inference vocoder module for `config` (HiFi-GAN without weight norm, or Vocos)."""
    return Vocos(config) if isinstance(config, VocosConfig) else HiFiGAN(config)


# ---------------------------------------------------------------------------------------------- a chunk's end
# What the vocoder sees past a chunk's last frame decides the chunk's last receptive field of audio, so every path
# gives it the same thing: silence (MEL_PAD_VALUE frames) for at least the receptive field. The per-module step
# vocodes each chunk followed by `end_silence_frames` of it (rtvox.runtime.streaming.vocode_batched); the
# captured pipeline picks a frame bucket with at least that much silence past each row (rtvox.engines.pipeline).
# Whatever lies further out (more of a bucket's silence, a convolution's zero padding) cannot reach the chunk's
# samples, so every backend's audio agrees at the chunk's end. Without the rule, vocoding exactly the chunk's
# frames (zero padding past it) and vocoding it in a silence-padded bucket differed by log-mel L1 0.121 on a
# chunk whose speech runs up to its end (BENCHMARKS.md).


def end_silence_frames(config: AnyVocoderConfig) -> int:
    """Frames of silence every path vocodes a chunk with past its last frame: the vocoder's receptive field."""
    return config.receptive_field_frames


def with_end_silence(mel: Tensor, frames: int) -> Tensor:
    """mel [..., n_mels, T] -> [..., n_mels, T + frames], the new frames silence; its audio's first T * HOP_LENGTH
    samples are the chunk's."""
    return F.pad(mel, (0, frames), value=MEL_PAD_VALUE)
