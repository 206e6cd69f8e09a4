"""Simulated arrival times for evaluation stores and test fixtures (schema owner only).

An evaluation writes a store in seconds; a real one is written over days and months,
and the family alarm's burst gate (docs/security.md) reads *when* notes were written
(``pgmem.notes.created_at``, which writers cannot set). :func:`simulate_arrival` moves
the write times of some of a namespace's notes into the past, as if they had arrived
then, and keeps what the database derives from them consistent (the namespace's
``created_at``, each family's ``first_seen``). It changes what the database would have
recorded, so it is a simulation tool: only the owner of ``pgmem.notes`` can run it (it
switches the immutability trigger off for its own transaction), every caller must say
in its output which times were simulated, and an attacker's notes are never moved by
the evaluation's poisoning conditions (only by the labelled ``patient`` attacker).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import psycopg

from pgmem.validate import at_least

_MOVE = """
UPDATE pgmem.notes AS n
SET created_at = now() - make_interval(secs => %(seconds_ago)s - %(spacing)s * r.position)
FROM (SELECT note_id,
             row_number() OVER (ORDER BY created_at, document_id, span_start, note_id) - 1 AS position
      FROM pgmem.notes
      WHERE namespace = %(namespace)s
        AND (%(families)s::text[] IS NULL OR family = ANY (%(families)s::text[]))
        AND (%(note_ids)s::uuid[] IS NULL OR note_id = ANY (%(note_ids)s::uuid[]))) AS r
WHERE n.namespace = %(namespace)s AND n.note_id = r.note_id
"""
_CONSISTENT = """
WITH firsts AS (
    SELECT family, min(created_at) AS first_seen FROM pgmem.notes WHERE namespace = %(namespace)s GROUP BY family
), families AS (
    UPDATE pgmem.family_stats AS s SET first_seen = f.first_seen
    FROM firsts AS f WHERE s.namespace = %(namespace)s AND s.family = f.family
)
UPDATE pgmem.namespaces SET created_at = least(created_at, (SELECT min(first_seen) FROM firsts))
WHERE namespace = %(namespace)s
"""


def simulate_arrival(
    conn: psycopg.Connection[Any],
    namespace: str,
    seconds_ago: float,
    *,
    families: Collection[str] | None = None,
    note_ids: Collection[str] | None = None,
    spacing: float = 0.0,
) -> int:
    """Move the write times of a namespace's notes into the past; returns how many moved.

    The selected notes (all, or those of ``families`` and/or ``note_ids``), in write
    order (then document, span, id), get ``now() - seconds_ago + spacing * position``:
    the first ``seconds_ago`` seconds ago, each next one ``spacing`` seconds later.
    Then every family's ``first_seen`` becomes its earliest note's write time and the
    namespace's ``created_at`` no later than that. One transaction (a savepoint inside
    one); only the owner of ``pgmem.notes`` may run it.
    """
    at_least("seconds_ago", seconds_ago, 0.0)
    at_least("spacing", spacing, 0.0)
    arguments = {
        "namespace": namespace,
        "seconds_ago": float(seconds_ago),
        "spacing": float(spacing),
        "families": None if families is None else sorted(families),
        "note_ids": None if note_ids is None else sorted(note_ids),
    }
    with conn.transaction():
        conn.execute("ALTER TABLE pgmem.notes DISABLE TRIGGER notes_immutable_rows")
        moved = conn.execute(_MOVE, arguments).rowcount
        conn.execute("ALTER TABLE pgmem.notes ENABLE TRIGGER notes_immutable_rows")
        conn.execute(_CONSISTENT, arguments)
    return moved
