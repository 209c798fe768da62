"""Engines: one compiled (or eager) executable per model module, chosen through a lazy backend registry."""

from rtvox.engines.base import MODULES, Engine, available_backends, build_engine

__all__ = ["MODULES", "Engine", "available_backends", "build_engine"]
