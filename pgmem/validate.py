"""Checks shared by every parameter object: a bad value is a ConfigurationError that
names the parameter and the allowed range."""

from __future__ import annotations

import math
import re

from pgmem.errors import ConfigurationError, InputError

#: What a namespace may be (the same rule as the CHECK constraint in sql/schema.sql).
NAMESPACE_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@/-]{0,127}$")


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


def check_namespace(namespace: object) -> str:
    """Return ``namespace`` if valid, else raise InputError saying the rule."""
    if not isinstance(namespace, str) or not NAMESPACE_PATTERN.match(namespace):
        raise InputError(
            f"namespace must be 1-128 characters of letters, digits and _.:@/- starting with a"
            f" letter or digit, got {namespace!r}"
        )
    return namespace
