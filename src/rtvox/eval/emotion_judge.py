"""The emotion judge: a small MLP over relative prosody features, trained on teacher-corpus audio only.

Weights live in `models/eval-emotion/` as `judge.safetensors` + `judge.json` (feature names, standardization,
labels, training figures). One 7-way model serves both the 7-emotion and the 5-emotion question: for the latter
the argmax is taken over the five basic labels only.

    rtvox train emotion-judge --corpus /work/corpus --out models/eval-emotion
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from torch import nn

from rtvox.constants import EMOTIONS
from rtvox.errors import ModelError
from rtvox.eval.judge_data import HELDOUT_SPLIT, CorpusFeatures
from rtvox.eval.prosody import FEATURES

BASIC_EMOTIONS: tuple[str, ...] = ("neutral", "happy", "sad", "angry", "surprised")
WEIGHTS_NAME, CONFIG_NAME = "judge.safetensors", "judge.json"
HIDDEN = 32
EPOCHS = 400
LEARNING_RATE = 1e-2
WEIGHT_DECAY = 1e-3


def default_judge_dir() -> Path:
    """models/eval-emotion next to src/ (the repository's models folder)."""
    return Path(__file__).resolve().parents[3] / "models" / "eval-emotion"


class JudgeNet(nn.Module):
    """Standardized relative features [B, F] -> emotion logits [B, len(labels)]."""

    mean: torch.Tensor  # [F] training-set mean of each feature
    scale: torch.Tensor  # [F] its standard deviation

    def __init__(self, n_features: int, n_labels: int, hidden: int = HIDDEN) -> None:
        super().__init__()
        self.register_buffer("mean", torch.zeros(n_features))
        self.register_buffer("scale", torch.ones(n_features))
        self.net = nn.Sequential(nn.Linear(n_features, hidden), nn.GELU(), nn.Linear(hidden, n_labels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits: torch.Tensor = self.net((x - self.mean) / self.scale)
        return logits


@dataclass
class EmotionJudge:
    """Classifies relative prosody features into emotions. Owns the network and its label order."""

    net: JudgeNet
    labels: tuple[str, ...]
    info: dict[str, Any]  # training figures, written to judge.json

    def probabilities(self, relative_features: np.ndarray, labels: tuple[str, ...] | None = None) -> np.ndarray:
        """Softmax over `labels` (default: all of the judge's) for rows [N, F]: [N, len(labels)]."""
        labels = labels or self.labels
        missing = [name for name in labels if name not in self.labels]
        if missing:
            raise ValueError(f"the judge does not know {missing}; it knows {', '.join(self.labels)}")
        x = torch.as_tensor(np.atleast_2d(relative_features), dtype=torch.float32)
        with torch.inference_mode():
            logits = self.net(x)[:, [self.labels.index(name) for name in labels]]
        return torch.softmax(logits, dim=1).numpy()

    def predict(self, relative_features: np.ndarray, labels: tuple[str, ...] | None = None) -> list[str]:
        labels = labels or self.labels
        return [labels[i] for i in self.probabilities(relative_features, labels).argmax(1)]

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        state = {k: v.detach().contiguous() for k, v in self.net.state_dict().items()}
        save_file(state, str(directory / WEIGHTS_NAME))
        config = {"features": list(FEATURES), "labels": list(self.labels), "hidden": HIDDEN, **self.info}
        (directory / CONFIG_NAME).write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, directory: Path | None = None) -> EmotionJudge:
        directory = directory or default_judge_dir()
        config_path = directory / CONFIG_NAME
        if not config_path.is_file():
            raise ModelError(f"no emotion judge at {directory}; train one with `rtvox train emotion-judge`")
        config = json.loads(config_path.read_text(encoding="utf-8"))
        if config["features"] != list(FEATURES):
            raise ModelError(f"the judge in {directory} was trained on other features; retrain it")
        labels = tuple(config["labels"])
        net = JudgeNet(len(FEATURES), len(labels), int(config["hidden"]))
        net.load_state_dict(load_file(str(directory / WEIGHTS_NAME)))
        info = {k: v for k, v in config.items() if k not in ("features", "labels", "hidden")}
        return cls(net=net.eval(), labels=labels, info=info)


def accuracy(judge: EmotionJudge, x: np.ndarray, y: list[str], labels: tuple[str, ...]) -> float:
    """Share of rows whose true label is in `labels` that the judge names right, choosing among `labels`."""
    keep = [i for i, name in enumerate(y) if name in labels]
    if not keep:
        return float("nan")
    predicted = judge.predict(x[keep], labels)
    return float(np.mean([predicted[k] == y[i] for k, i in enumerate(keep)]))


def train_judge(data: CorpusFeatures, *, labels: tuple[str, ...] = EMOTIONS, seed: int = 0) -> EmotionJudge:
    """Fit the judge on the train split; pick the epoch by the `val` split (train speakers' unseen clips) and
    report accuracy on the heldout-teacher speakers, whose timbre it never saw."""
    x_all = data.relative_features()
    y_all = list(data.emotions)
    split = np.asarray(data.splits)
    train = np.flatnonzero((split == "train") & np.isin(y_all, labels))
    select = np.flatnonzero((split == "val") & np.isin(y_all, labels))
    held = np.flatnonzero(split == HELDOUT_SPLIT)
    if train.size == 0:
        raise ValueError("no train-split clips to fit the emotion judge on")
    torch.manual_seed(seed)
    net = JudgeNet(x_all.shape[1], len(labels))
    x_train = torch.as_tensor(x_all[train], dtype=torch.float32)
    y_train = torch.as_tensor([labels.index(y_all[i]) for i in train])
    net.mean.copy_(x_train.mean(0))
    net.scale.copy_(x_train.std(0).clamp_min(1e-6))
    optimizer = torch.optim.AdamW(net.parameters(), lr=LEARNING_RATE, weight_decay=WEIGHT_DECAY)
    judge = EmotionJudge(net=net, labels=labels, info={})
    best: tuple[float, int, dict[str, torch.Tensor]] = (-1.0, 0, {})
    for epoch in range(EPOCHS):  # full batch: a few thousand rows of 10 features
        net.train()
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(net(x_train), y_train)
        loss.backward()
        optimizer.step()
        if epoch % 10 == 9 and select.size:
            net.eval()
            score = accuracy(judge, x_all[select], [y_all[i] for i in select], labels)
            if score > best[0]:
                best = (score, epoch + 1, {k: v.clone() for k, v in net.state_dict().items()})
    if best[2]:
        net.load_state_dict(best[2])
    net.eval()

    def acc(rows: np.ndarray, subset: tuple[str, ...]) -> float:
        return round(accuracy(judge, x_all[rows], [y_all[i] for i in rows], subset), 4)

    judge.info = {
        "trained_on": "teacher corpus, train split (prosody features relative to each speaker's neutral mean)",
        "epochs": best[1] or EPOCHS,
        "clips": {"train": int(train.size), "val": int(select.size), "heldout_teacher": int(held.size)},
        "heldout_speakers": sorted({data.speakers[i] for i in held}),
        "accuracy": {
            "train_7": acc(train, labels),
            "val_7": acc(select, labels),
            "heldout_7": acc(held, labels),
            "train_5": acc(train, BASIC_EMOTIONS),
            "val_5": acc(select, BASIC_EMOTIONS),
            "heldout_5": acc(held, BASIC_EMOTIONS),
        },
    }
    return judge
