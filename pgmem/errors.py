"""The exception hierarchy: one root, a few meaningful branches.

Every error pgmem raises on purpose is a :class:`PgmemError`. Database errors are
wrapped once, at the boundary in :mod:`pgmem.db`, with ``raise ... from exc`` so the
original driver error stays attached.
"""

from __future__ import annotations


class PgmemError(Exception):
    """Root of every error pgmem raises."""


class ConfigurationError(PgmemError):
    """A parameter object, option or environment variable has an invalid value."""


class InputError(PgmemError):
    """A span, note field, query or hint given by the caller is invalid."""


class SchemaError(PgmemError):
    """The database schema is missing, outdated or was changed outside pgmem."""


class EmbeddingError(PgmemError):
    """An embedder failed, or its vectors do not match what a namespace was built with."""


class EmbeddingMismatchError(EmbeddingError):
    """A namespace was written with another embedding model or dimension."""


class RerankError(PgmemError):
    """A caller-supplied re-ranker failed or returned unusable scores (names the re-ranker).

    Raised before anything is packed or logged: a failed re-ranking leaves nothing half-done.
    """


class DatabaseError(PgmemError):
    """PostgreSQL refused or failed an operation (wraps the driver error)."""


class ChatError(PgmemError):
    """A chat model call failed (wraps the client error; names the base URL and model)."""


class FamilyRightsError(PgmemError):
    """A note was written under a provenance family bound to other writer roles.

    An admin binds a family of a namespace to writer roles with :func:`pgmem.bind_family`;
    the database then refuses notes of that family from every other writer.
    """
