"""What a database's pgmem schema is, read from the system catalogs over a connection.

:func:`catalog_snapshot` returns, per kind of object, the sorted rows that define it:
definitions come from PostgreSQL's own deparsers (``pg_get_constraintdef``,
``pg_get_indexdef``, ``pg_get_functiondef``, ``pg_get_triggerdef``, ``pg_get_viewdef``),
so two databases compare equal exactly when they would behave the same. No client
binary is involved (unlike ``pg_dump``), so it works against any server a test runs on.

Names that differ between two otherwise equal databases are normalised: the role that
ran the DDL (the owner and grantor of everything) is ``<migrator>``, the public pseudo
role ``PUBLIC``. Objects that belong to an extension are left to the ``extensions`` row.
"""

from __future__ import annotations

import re
from typing import Any

import psycopg
from psycopg.rows import tuple_row

#: The bookkeeping table alembic owns; it exists only where a chain was stamped or run.
IGNORED_RELATIONS = ("alembic_version",)

_NAMESPACE = "(SELECT oid FROM pg_namespace WHERE nspname = %(schema)s)"
_NOT_EXTENSION_MEMBER = (
    "NOT EXISTS (SELECT FROM pg_depend dep WHERE dep.classid = {catalog}::regclass"
    " AND dep.objid = {oid} AND dep.deptype = 'e')"
)
_RELATION = (
    f"c.relnamespace = {_NAMESPACE} AND c.relname <> ALL(%(ignored)s)"
    f" AND {_NOT_EXTENSION_MEMBER.format(catalog=repr('pg_class'), oid='c.oid')}"
)
_ROLE = (
    "CASE WHEN {role} = 0 THEN 'PUBLIC' WHEN pg_get_userbyid({role}) = current_user THEN '<migrator>'"
    " ELSE pg_get_userbyid({role})::text END"
)
_ACL_COLUMNS = (
    f"{_ROLE.format(role='acl.grantee')}, {_ROLE.format(role='acl.grantor')}, acl.privilege_type, acl.is_grantable"
)

QUERIES: dict[str, str] = {
    "schema": f"""
        SELECT n.nspname, pg_get_userbyid(n.nspowner) = current_user AS owned_by_migrator
        FROM pg_namespace n WHERE n.oid = {_NAMESPACE}""",
    "extensions": """
        SELECT e.extname, e.extversion, e.extnamespace::regnamespace::text FROM pg_extension e""",
    "relations": f"""
        SELECT c.relname, c.relkind::text, c.relpersistence::text, c.relrowsecurity, c.relforcerowsecurity,
               coalesce(c.reloptions, '{{}}')::text, c.relreplident::text,
               pg_get_userbyid(c.relowner) = current_user AS owned_by_migrator
        FROM pg_class c
        WHERE c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f', 'c') AND {_RELATION}""",
    "columns": f"""
        SELECT c.relname, a.attname,
               row_number() OVER (PARTITION BY a.attrelid ORDER BY a.attnum) AS position,
               format_type(a.atttypid, a.atttypmod), a.attnotnull, pg_get_expr(d.adbin, d.adrelid) AS default,
               a.attidentity::text, a.attgenerated::text, a.attstorage::text,
               CASE WHEN a.attcollation <> t.typcollation THEN a.attcollation::regcollation::text END AS collation
        FROM pg_attribute a
        JOIN pg_class c ON c.oid = a.attrelid
        JOIN pg_type t ON t.oid = a.atttypid
        LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
        WHERE a.attnum > 0 AND NOT a.attisdropped AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'c') AND {_RELATION}""",
    "constraints": f"""
        SELECT coalesce(c.relname, t.typname), con.conname, con.contype::text, pg_get_constraintdef(con.oid, true),
               con.condeferrable, con.condeferred, con.convalidated
        FROM pg_constraint con
        LEFT JOIN pg_class c ON c.oid = con.conrelid
        LEFT JOIN pg_type t ON t.oid = con.contypid
        WHERE con.connamespace = {_NAMESPACE} AND coalesce(c.relname, '') <> ALL(%(ignored)s)""",
    "indexes": f"""
        SELECT i.relname, pg_get_indexdef(i.oid), coalesce(i.reloptions, '{{}}')::text
        FROM pg_index x
        JOIN pg_class i ON i.oid = x.indexrelid
        JOIN pg_class c ON c.oid = x.indrelid
        WHERE {_RELATION}""",
    "functions": f"""
        SELECT p.oid::regprocedure::text, p.prokind::text, p.provolatile::text, p.prosecdef, p.proconfig::text,
               p.proleakproof, p.proisstrict, p.proparallel::text,
               CASE WHEN p.prokind <> 'a' THEN pg_get_functiondef(p.oid) END AS definition,
               pg_get_userbyid(p.proowner) = current_user AS owned_by_migrator
        FROM pg_proc p
        WHERE p.pronamespace = {_NAMESPACE} AND {_NOT_EXTENSION_MEMBER.format(catalog=repr("pg_proc"), oid="p.oid")}""",
    "triggers": f"""
        SELECT c.relname, t.tgname, pg_get_triggerdef(t.oid, true), t.tgenabled::text
        FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
        WHERE NOT t.tgisinternal AND {_RELATION}""",
    "views": f"""
        SELECT c.relname, pg_get_viewdef(c.oid, true) FROM pg_class c WHERE c.relkind IN ('v', 'm') AND {_RELATION}""",
    "policies": """
        SELECT p.tablename, p.policyname, p.permissive, p.cmd, p.qual, p.with_check,
               array(SELECT role FROM unnest(p.roles) AS role ORDER BY 1)::text
        FROM pg_policies p WHERE p.schemaname = %(schema)s""",
    "sequences": f"""
        SELECT c.relname, format_type(s.seqtypid, NULL), s.seqstart, s.seqincrement, s.seqmax, s.seqmin,
               s.seqcache, s.seqcycle, owner.relname AS owned_by_table, attribute.attname AS owned_by_column
        FROM pg_sequence s
        JOIN pg_class c ON c.oid = s.seqrelid
        LEFT JOIN pg_depend dep ON dep.classid = 'pg_class'::regclass AND dep.objid = c.oid
             AND dep.refclassid = 'pg_class'::regclass AND dep.deptype IN ('a', 'i')
        LEFT JOIN pg_class owner ON owner.oid = dep.refobjid
        LEFT JOIN pg_attribute attribute ON attribute.attrelid = dep.refobjid AND attribute.attnum = dep.refobjsubid
        WHERE {_RELATION}""",
    "types": f"""
        SELECT t.typname, t.typtype::text, format_type(t.typbasetype, t.typtypmod), t.typnotnull, t.typdefault,
               array(SELECT e.enumlabel FROM pg_enum e WHERE e.enumtypid = t.oid ORDER BY e.enumsortorder)::text
        FROM pg_type t
        WHERE t.typnamespace = {_NAMESPACE}
          AND (t.typrelid = 0 OR (SELECT c.relkind FROM pg_class c WHERE c.oid = t.typrelid) = 'c')
          AND NOT EXISTS (SELECT FROM pg_type element WHERE element.typarray = t.oid)
          AND {_NOT_EXTENSION_MEMBER.format(catalog=repr("pg_type"), oid="t.oid")}""",
    "statistics": f"""
        SELECT s.stxname, pg_get_statisticsobjdef(s.oid) FROM pg_statistic_ext s
        WHERE s.stxnamespace = {_NAMESPACE}""",
    "comments": f"""
        SELECT (pg_identify_object(d.classoid, d.objoid, d.objsubid)).identity, d.description
        FROM pg_description d
        WHERE d.objoid >= 16384  -- FirstNormalObjectId: skips the thousands of built-in comments
          AND ((pg_identify_object(d.classoid, d.objoid, d.objsubid)).schema = %(schema)s
               OR (d.classoid = 'pg_namespace'::regclass AND d.objoid = {_NAMESPACE}))""",
    # A NULL acl means the owner's defaults; compare what they amount to, not the NULL.
    # The object column is text: as name (nspname's type) it would cut signatures at 63 bytes.
    "grants": f"""
        SELECT 'schema', n.nspname::text, NULL, {_ACL_COLUMNS}
        FROM pg_namespace n, aclexplode(coalesce(n.nspacl, acldefault('n', n.nspowner))) acl
        WHERE n.oid = {_NAMESPACE}
        UNION ALL
        SELECT 'relation', c.relname, NULL, {_ACL_COLUMNS}
        FROM pg_class c, aclexplode(coalesce(c.relacl, acldefault(CASE c.relkind WHEN 'S' THEN 's' ELSE 'r' END::"char",
                                                                 c.relowner))) acl
        WHERE c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f') AND {_RELATION}
        UNION ALL
        SELECT 'column', c.relname, a.attname, {_ACL_COLUMNS}
        FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid, aclexplode(a.attacl) acl
        WHERE a.attnum > 0 AND NOT a.attisdropped AND {_RELATION}
        UNION ALL
        SELECT 'function', p.oid::regprocedure::text, NULL, {_ACL_COLUMNS}
        FROM pg_proc p, aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) acl
        WHERE p.pronamespace = {_NAMESPACE}
        UNION ALL
        SELECT 'type', t.typname, NULL, {_ACL_COLUMNS}
        FROM pg_type t, aclexplode(coalesce(t.typacl, acldefault('T', t.typowner))) acl
        WHERE t.typnamespace = {_NAMESPACE} AND t.typrelid = 0
        UNION ALL
        SELECT 'default privileges', d.defaclobjtype::text, NULL, {_ACL_COLUMNS}
        FROM pg_default_acl d, aclexplode(d.defaclacl) acl
        WHERE d.defaclnamespace = {_NAMESPACE}""",
}

Snapshot = dict[str, list[tuple[Any, ...]]]


def catalog_snapshot(conn: psycopg.Connection[Any], schema: str = "pgmem") -> Snapshot:
    """Every definition of the objects in ``schema``, by kind, as sorted rows."""
    params = {"schema": schema, "ignored": list(IGNORED_RELATIONS)}
    snapshot: Snapshot = {}
    with conn.cursor(row_factory=tuple_row) as cursor:
        for kind, query in QUERIES.items():
            rows = cursor.execute(query, params).fetchall()
            snapshot[kind] = sorted(rows, key=repr)
    return snapshot


def snapshot_differences(left: Snapshot, right: Snapshot, names: tuple[str, str] = ("left", "right")) -> list[str]:
    """One line per row that only one side has, prefixed by its kind; empty when equal."""
    lines = []
    for kind in QUERIES:
        left_rows, right_rows = set(left.get(kind, [])), set(right.get(kind, []))
        lines += [f"{kind}: only in {names[0]}: {row}" for row in sorted(left_rows - right_rows, key=repr)]
        lines += [f"{kind}: only in {names[1]}: {row}" for row in sorted(right_rows - left_rows, key=repr)]
    return lines


def differing_kinds(left: Snapshot, right: Snapshot) -> set[str]:
    """The kinds of object whose rows differ between two snapshots."""
    return {line.split(":", 1)[0] for line in snapshot_differences(left, right)}


#: The kinds of pgmem's group roles, named ``{prefix}_{kind}``.
GROUP_ROLE_KINDS = ("reader", "writer", "admin")


def group_role_memberships(conn: psycopg.Connection[Any], prefix: str = "pgmem") -> list[tuple[Any, ...]]:
    """Which group role of ``prefix`` is a member of which, by kind, with the grant's options.

    Roles are cluster-wide, so this is no part of :func:`catalog_snapshot`: compare two
    installs made under different prefixes of one cluster.
    """
    names = [f"{prefix}_{kind}" for kind in GROUP_ROLE_KINDS]
    with conn.cursor(row_factory=tuple_row) as cursor:
        rows = cursor.execute(
            """
            SELECT substr(member.rolname, length(%(prefix)s) + 2), substr(role.rolname, length(%(prefix)s) + 2),
                   m.admin_option, m.inherit_option, m.set_option
            FROM pg_auth_members m
            JOIN pg_roles AS role ON role.oid = m.roleid
            JOIN pg_roles AS member ON member.oid = m.member
            WHERE role.rolname = ANY(%(names)s) AND member.rolname = ANY(%(names)s)""",
            {"prefix": prefix, "names": names},
        ).fetchall()
    return sorted(rows, key=repr)


def with_default_role_prefix(snapshot: Snapshot, prefix: str) -> Snapshot:
    """``snapshot`` of an install under ``prefix`` with its group roles named as under ``pgmem``."""
    pattern = re.compile(rf"\b{re.escape(prefix)}_({'|'.join(GROUP_ROLE_KINDS)})\b")

    def rename(value: Any) -> Any:
        return pattern.sub(r"pgmem_\1", value) if isinstance(value, str) else value

    return {kind: sorted((tuple(rename(v) for v in row) for row in rows), key=repr) for kind, rows in snapshot.items()}
