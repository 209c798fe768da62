"""Markdown tables of `rtvox eval` results (the JSON stays the full record)."""

from __future__ import annotations

from typing import Any

METRIC_NAMES = {"wer": "WER (words)", "cer": "CER (Han chars)", "mer": "mixed error (Han chars + words)"}


def pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f} %"


def _num(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def intelligibility_rows(results: dict[str, Any]) -> list[str]:
    rows = [
        "| set | n | audio s | metric | pooled [95 % bootstrap] | mean per sentence |",
        "|---|---|---|---|---|---|",
    ]
    for lang, data in results.get("sets", {}).items():
        summary = data["summary"]
        for name, metric in summary["metrics"].items():
            label = METRIC_NAMES.get(name, name) + (" **primary**" if name == summary["primary"] else "")
            pooled = pct(metric["rate"])
            if "ci95" in metric:  # result files before 2026-12-07 have none
                pooled += f" [{pct(metric['ci95'][0])}, {pct(metric['ci95'][1])}]"
            rows.append(
                f"| {lang} | {summary['n']} | {summary['audio_seconds']} | {label} | {pooled} | "
                f"{pct(metric['mean_sentence_rate'])} |"
            )
    return rows


def markdown_report(results: dict[str, Any]) -> str:
    """One page: what was measured, on what, with which command, and the figures."""
    subject = results.get("model") or results.get("audio_dir") or "?"
    lines = [
        f"# rtvox eval: {subject}",
        "",
        f"- date: {results.get('date', '?')}; machine: {results.get('machine', '?')}; wall: {results.get('wall_s')} s",
        f"- command: `{results.get('command', '')}`",
    ]
    if "voice" in results:
        lines.append(f"- voice: {results['voice']}")
    asr = results.get("asr", {})
    lines += [f"- ASR judge: {asr.get('model')} {asr.get('compute_type')}, beam {asr.get('beam_size')}", ""]
    lines += ["## Intelligibility", "", *intelligibility_rows(results), ""]
    if clone := results.get("clone"):
        lines += [
            "## Cloning (references outside the training data)",
            "",
            "| what | trials | mean cosine | min cosine | closer to own reference than to any built-in |",
            "|---|---|---|---|---|",
            f"| model, {clone['references']} references | {clone['trials']} | {_num(clone['mean_cosine'])} | "
            f"{_num(clone['min_cosine'])} | {pct(clone['closer_to_reference_share'])} |",
        ]
        if not clone.get("teacher_ceiling"):
            lines += ["", "| reference | seconds | mean cosine | its cosine to nearest built-in |", "|---|---|---|---|"]
        if ceiling := clone.get("teacher_ceiling"):
            lines += [
                f"| teacher ceiling: held-out speakers' own other utterances | {ceiling['trials']} | "
                f"{_num(ceiling['mean_cosine'])} | {_num(ceiling['min_cosine'])} | "
                f"{pct(ceiling['closer_to_reference_share'])} |",
                "",
                "| reference | seconds | mean cosine | its cosine to nearest built-in |",
                "|---|---|---|---|",
            ]
        for ref in clone["per_reference"]:
            lines.append(
                f"| {ref['reference']} | {ref['reference_seconds']} | {_num(ref['mean_cosine'])} | "
                f"{_num(ref['reference_cosine_to_nearest_builtin'])} |"
            )
        lines.append("")
    if emo := results.get("emotion"):
        lines += [
            "## Emotion (held-out prosody judge, 5 emotions)",
            "",
            f"- accuracy: {pct(emo['accuracy'])} over {emo['trials']} clips (voices: {', '.join(emo['voices'])}); "
            f"the judge's own accuracy on held-out teacher speakers: {pct(emo['judge_heldout_teacher_accuracy'])}",
            "",
            "| emotion | judged right | error rate (first voice) | Δ vs neutral [95 % paired bootstrap] |",
            "|---|---|---|---|",
        ]
        errors = emo.get("error_rate_by_emotion", {})
        deltas = emo.get("error_rate_delta_vs_neutral", {})
        spans = emo.get("error_rate_delta_ci95", {})

        def span(key: str) -> str:
            return f" [{100 * spans[key][0]:+.1f}, {100 * spans[key][1]:+.1f}]" if key in spans else ""

        for emotion, acc in emo["per_emotion_accuracy"].items():
            err = ", ".join(f"{k.split('/')[1]} {pct(v)}" for k, v in errors.items() if k.startswith(emotion + "/"))
            delta = ", ".join(
                f"{k.split('/')[1]} {100 * v:+.1f}{span(k)}" for k, v in deltas.items() if k.startswith(emotion + "/")
            )
            lines.append(f"| {emotion} | {pct(acc)} | {err or '–'} | {delta or '–'} |")
        lines.append("")
    if dur := results.get("duration"):
        lines += [
            "## Duration control (targets " + ", ".join(f"{f}×" for f in dur["factors"]) + " natural length)",
            "",
            "| measure | mean abs(actual/target − 1) | max | share ≤ 2 % |",
            "|---|---|---|---|",
            f"| whole output | {pct(dur['mean_error'])} | {pct(dur['max_error'])} | {pct(dur['share_within_2pct'])} |",
            f"| speech span (silence trimmed) | {pct(dur['mean_span_error'])} | {pct(dur['max_span_error'])} | "
            f"{pct(dur['span_share_within_2pct'])} |",
            "",
        ]
    return "\n".join(lines)
