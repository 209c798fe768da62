"""Engines: one compiled (or eager) executable per model module, chosen through a lazy backend registry."""

from rtvox.engines.base import MODULES, BuildOptions, Engine, available_backends, build_engine
from rtvox.engines.build import build_engines
from rtvox.engines.shapes import ShapeProfile

__all__ = ["MODULES", "BuildOptions", "Engine", "ShapeProfile", "available_backends", "build_engine", "build_engines"]
