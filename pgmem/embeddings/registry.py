"""Embedders by name: the registry that spec strings such as ``"hashing:256"`` resolve through.

Each implementation module registers its kind when it is imported (``minilm``,
``hashing``, ``openai``); the package imports all three, so a spec works as soon as
``pgmem.embeddings`` is imported. An application registers its own kind the same way,
with :func:`register_embedder`. Nothing here imports an implementation.
"""

from __future__ import annotations

import functools
import inspect
import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass

from pgmem.embeddings.base import Embedder
from pgmem.errors import ConfigurationError
from pgmem.validate import describe_value

ENVIRONMENT_VARIABLE = "PGMEM_EMBEDDER"
DEFAULT_SPEC = "minilm"
#: A spec kind: lower-case letters, digits, ``_`` and ``-``, starting with a letter.
KIND_PATTERN = re.compile(r"[a-z][a-z0-9_-]{0,63}")

#: Builds an embedder from the option after the colon (``""`` when the spec has none).
EmbedderFactory = Callable[[str], Embedder]


@dataclass(frozen=True)
class _Registration:
    factory: EmbedderFactory
    forms: tuple[str, ...]
    takes_option: bool


_lock = threading.Lock()
_registry: dict[str, _Registration] = {}


def register_embedder(
    kind: str,
    factory: EmbedderFactory,
    *,
    option: str | None = None,
    replace: bool = False,
) -> None:
    """Make ``get_embedder("<kind>")`` (and ``"<kind>:<option>"``) build an embedder.

    Parameters
    ----------
    kind : str
        The spec's name before the colon: lower-case letters, digits, ``_``, ``-``.
        ``"default"`` is reserved (it means ``"minilm"``).
    factory : callable
        Called with the option after the colon (``""`` for a bare ``kind``); returns an
        :class:`~pgmem.embeddings.Embedder` or raises ConfigurationError naming the bad
        option. It is called once per distinct spec: :func:`get_embedder` keeps the
        instance for the life of the process.
    option : str, optional
        How the option is written in messages, e.g. ``"<dimension>"``. Without it the
        kind takes no option and ``"<kind>:anything"`` is refused.
    replace : bool
        Allow replacing an existing registration (default: refused, so a plugin cannot
        silently shadow ``openai``).

    Raises
    ------
    ConfigurationError
        ``kind`` is malformed or reserved, or already registered and ``replace`` is false.
    """
    if not isinstance(kind, str) or not KIND_PATTERN.fullmatch(kind) or kind == "default":
        raise ConfigurationError(
            f"embedder kind must match {KIND_PATTERN.pattern} and not be 'default', got {describe_value(kind)}"
        )
    if not callable(factory):
        raise ConfigurationError(f"embedder factory for {kind!r} must be callable, got {type(factory).__name__}")
    forms = (kind,) if option is None else (kind, f"{kind}:{option}")
    with _lock:
        if kind in _registry and not replace:
            raise ConfigurationError(f"embedder kind {kind!r} is already registered; pass replace=True to replace it")
        _registry[kind] = _Registration(factory, forms, option is not None)
        # A cached instance built by the previous factory must not outlive it.
        _from_spec.cache_clear()


def registered_kinds() -> tuple[str, ...]:
    """The spec kinds :func:`get_embedder` knows, in registration order."""
    with _lock:
        return tuple(_registry)


def spec_choices() -> str:
    """Every spec form the registry accepts, quoted, for error messages."""
    with _lock:
        forms = ["default", *(form for registration in _registry.values() for form in registration.forms)]
    return ", ".join(repr(form) for form in forms)


def default_embedder_spec() -> str:
    """Return the embedder spec from ``PGMEM_EMBEDDER``, or ``"minilm"`` when unset or empty."""
    return os.environ.get(ENVIRONMENT_VARIABLE, "").strip() or DEFAULT_SPEC


def resolve_embedder(choice: Embedder | str | None) -> Embedder:
    """The embedder asked for; when ``choice`` is None, the one ``$PGMEM_EMBEDDER`` names,
    else the bundled MiniLM. This is how the public API and the CLI pick one."""
    return get_embedder(choice if choice is not None else default_embedder_spec())


_EMBEDDER_MEMBERS = ("name", "dimension", "embed")


def _class_defines_embedder_members(kind: type) -> bool:
    """Whether ``kind`` or a base class defines every member an embedder needs (then each
    of its instances has them, whatever its own attributes)."""
    return all(any(member in vars(base) for base in kind.__mro__) for member in _EMBEDDER_MEMBERS)


def _looks_like_embedder(candidate: object) -> bool:
    # isinstance() against a runtime_checkable Protocol calls hasattr() on Python 3.11,
    # which would evaluate a lazy property such as OpenAIEmbedder.dimension (a network
    # probe). getattr_static checks the same members without running any code; a class
    # defining them all answers for its instances without it (every pack given an
    # embedder object asks: three getattr_static calls cost ~12 us, the class dicts ~1 us).
    if _class_defines_embedder_members(type(candidate)):
        return callable(getattr(candidate, "embed", None))
    for member in _EMBEDDER_MEMBERS:
        try:
            inspect.getattr_static(candidate, member)
        except AttributeError:
            return False
    return callable(getattr(candidate, "embed", None))


def get_embedder(spec: str | Embedder | None) -> Embedder:
    """Return the embedder named by ``spec``.

    Parameters
    ----------
    spec : str, Embedder or None
        ``None``, ``"default"`` or ``"minilm"``: the bundled MiniLM model (one shared
        instance per process). ``"hashing"`` or ``"hashing:<dimension>"``: a
        :class:`~pgmem.embeddings.HashingEmbedder`. ``"openai"`` or
        ``"openai:<model>"``: an :class:`~pgmem.embeddings.OpenAIEmbedder` configured
        from the environment (default model ``text-embedding-3-small``). Any kind added
        with :func:`register_embedder`. An object that already implements
        :class:`Embedder` is returned unchanged. The environment is not consulted for
        the spec itself; pass :func:`default_embedder_spec` to honour ``PGMEM_EMBEDDER``.

    Returns
    -------
    Embedder
        One instance per distinct spec and process.

    Raises
    ------
    ConfigurationError
        ``spec`` names no registered embedder or carries an invalid option.
    """
    if spec is None:
        return _from_spec(DEFAULT_SPEC)
    if not isinstance(spec, str):
        if _looks_like_embedder(spec):
            return spec
        raise ConfigurationError(f"embedder must be a spec string or an Embedder, got {type(spec).__name__}")
    return _from_spec(spec)


@functools.lru_cache(maxsize=32)
def _from_spec(spec: str) -> Embedder:
    # One instance per spec and process: an OpenAI embedder discovers its dimension
    # with a request, and the MiniLM session is ~25 MB; neither should be repeated
    # for every pack.
    kind, _, option = spec.strip().partition(":")
    kind = kind.lower()
    option = option.strip()
    if kind == "default" and not option:
        kind = DEFAULT_SPEC
    with _lock:
        registration = _registry.get(kind)
    if registration is None or (option and not registration.takes_option):
        raise ConfigurationError(f"unknown embedder spec {describe_value(spec)}; choose one of {spec_choices()}")
    return registration.factory(option)
