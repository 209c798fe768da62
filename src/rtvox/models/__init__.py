"""Torch modules with export-clean forwards, and the model-directory format that holds their weights.

The GE2E speaker encoder lives in `rtvox.models.speaker` (import it from there; it pulls in the audio stack).
"""

from rtvox.models.acoustic import AcousticConfig, AcousticModel, AcousticTrainOutput, acoustic_losses
from rtvox.models.bundle import ModelBundle, ModelConfig, make_random_bundle, model_hash
from rtvox.models.emotion import EmotionConfig, EmotionEncoder, EmotionTable, emotion_index, fuse_condition
from rtvox.models.vocoder import HiFiGAN, VocoderConfig

__all__ = [
    "AcousticConfig",
    "AcousticModel",
    "AcousticTrainOutput",
    "EmotionConfig",
    "EmotionEncoder",
    "EmotionTable",
    "HiFiGAN",
    "ModelBundle",
    "ModelConfig",
    "VocoderConfig",
    "acoustic_losses",
    "emotion_index",
    "fuse_condition",
    "make_random_bundle",
    "model_hash",
]
