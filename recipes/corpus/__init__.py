"""Training-corpus builder for rtvox: synthesizes a zh/en/mixed, multi-speaker, multi-emotion corpus from
offline teacher TTS engines, and imports real LJSpeech/AISHELL-3 style datasets into the same manifest format.

Not imported by the runtime. Runs in its own virtual environment (see recipes/corpus/README.md).
"""
