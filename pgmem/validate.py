"""Checks shared by every parameter object: a bad value is a ConfigurationError that
names the parameter and the allowed range."""

from __future__ import annotations

import math

from pgmem.errors import ConfigurationError


def finite(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigurationError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise ConfigurationError(f"{name} must be finite, got {value!r}")


def at_least(name: str, value: float, low: float, *, strict: bool = False) -> None:
    finite(name, value)
    if value < low or (strict and value == low):
        rule = ">" if strict else ">="
        raise ConfigurationError(f"{name} must be {rule} {low}, got {value!r}")


def between(name: str, value: float, low: float, high: float) -> None:
    finite(name, value)
    if not low <= value <= high:
        raise ConfigurationError(f"{name} must be in [{low}, {high}], got {value!r}")


def whole(name: str, value: int, low: int, high: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigurationError(f"{name} must be a whole number, got {value!r}")
    if value < low or (high is not None and value > high):
        bound = f"in [{low}, {high}]" if high is not None else f">= {low}"
        raise ConfigurationError(f"{name} must be {bound}, got {value!r}")
