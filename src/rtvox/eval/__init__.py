"""Quality evaluation (`rtvox eval`, extra `eval`): Whisper-base intelligibility (WER/CER), cloning similarity
with the GE2E encoder, emotion accuracy with a prosody judge trained on teacher audio, duration-control error.

Modules: asr (Whisper judge), metrics (normalization, error rates), intelligibility, cloning, prosody +
judge_data + emotion_judge (the emotion judge), expressive (emotion and duration tests), runner, report, commands.
"""
