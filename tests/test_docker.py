"""docker/: what can be checked without a Docker engine.

The compose files' references (services, volumes, mounted files, build contexts), the
Dockerfiles' COPY sources and entrypoint, the server settings (accepted by a real
PostgreSQL), and the one-shot roles script (run with psql against a migrated database).
"""

from __future__ import annotations

import contextlib
import io
import re
import shutil
import subprocess
import tomllib
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from deployment import CITUS_COMPOSE, COMPOSE, DOCKER, compose, database_service, server_settings
from psycopg import sql
from replication import ReplicatedCluster

import pgmem

ROOT = DOCKER.parent


def _dockerfile_instructions(path: Path) -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", path.read_text())
    lines = (line.strip() for line in text.splitlines())
    return [
        (parts[0].upper(), parts[1] if len(parts) > 1 else "")
        for parts in (line.split(None, 1) for line in lines if line and not line.startswith("#"))
    ]


@pytest.mark.parametrize("path", [COMPOSE, CITUS_COMPOSE], ids=["single-node", "citus"])
def test_compose_references_resolve(path: Path) -> None:
    spec = compose(path)
    services: dict[str, Any] = spec["services"]
    declared_volumes = set(spec.get("volumes") or {})
    declared_networks = set(spec.get("networks") or {})
    built_images = {service.get("image") for service in services.values() if service.get("build")}
    for name, service in services.items():
        for dependency in service.get("depends_on") or {}:
            assert dependency in services, f"{name} depends on unknown service {dependency}"
        for network in service.get("networks") or []:
            assert network in declared_networks, f"{name} uses undeclared network {network}"
        for volume in service.get("volumes") or []:
            source = volume.split(":", 1)[0]
            if source.startswith((".", "/")):
                assert (path.parent / source).exists(), f"{name} mounts missing {source}"
            else:
                assert source in declared_volumes, f"{name} uses undeclared volume {source}"
        build = service.get("build")
        if build:
            context = path.parent / build["context"]
            assert (context / build["dockerfile"]).is_file(), f"{name}: no {build['dockerfile']} in {context}"
        image = service.get("image", "")
        # Images pulled from a registry are pinned to a version; pgmem's own are built here.
        assert image in built_images or re.search(r":[^:]*\d", image), f"{name}: image {image!r} is not pinned"
        if "healthcheck" in service:
            assert service["healthcheck"]["test"][0] in ("CMD", "CMD-SHELL")


def test_every_server_setting_is_accepted_by_postgresql(replicated: ReplicatedCluster) -> None:
    settings = server_settings()
    assert {"shared_buffers", "maintenance_work_mem", "wal_level"} <= set(settings)
    arguments = [part for name, value in settings.items() for part in ("-c", f"{name}={value}")]
    # postgres -C reads the configuration (with these settings on top), prints one
    # value and exits: an unknown setting or a bad value is an error, without a server.
    for name, value in settings.items():
        shown = replicated.run("postgres", "-D", str(replicated.primary.data), *arguments, "-C", name).strip()
        assert shown, f"{name}={value} shows no value"


def test_the_database_image_is_the_testcontainers_image() -> None:
    service = database_service()
    assert service["image"].startswith("pgvector/pgvector:")
    conftest = (ROOT / "tests" / "conftest.py").read_text()
    assert "database_container()" in conftest and "pgvector/pgvector:" not in conftest


@pytest.mark.parametrize("path", [DOCKER / "Dockerfile", DOCKER / "citus" / "Dockerfile"], ids=["pgmem", "citus"])
def test_dockerfile_copies_what_exists(path: Path) -> None:
    context = ROOT if path.parent == DOCKER else path.parent
    copies = [argument for instruction, argument in _dockerfile_instructions(path) if instruction == "COPY"]
    for argument in copies:
        if argument.startswith("--from"):
            continue
        *sources, _target = argument.split()
        for source in sources:
            assert (context / source).exists(), f"{path.name}: COPY {source} is not in {context}"


def test_the_image_entrypoint_is_the_pgmem_command() -> None:
    instructions = dict(_dockerfile_instructions(DOCKER / "Dockerfile"))
    assert instructions["ENTRYPOINT"] == '["pgmem"]'
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["pgmem"] == "pgmem.cli:main"


def test_the_roles_script_creates_a_namespace_writer_that_runs_the_docs_example(dsn: str, server_dsn: str) -> None:
    from pgserver._commands import POSTGRES_BIN_PATH

    role = f"t_app_{uuid.uuid4().hex[:8]}"
    command = [
        str(Path(POSTGRES_BIN_PATH) / "psql"), dsn, "-q", "-v", "ON_ERROR_STOP=1",
        "-v", f"app_role={role}", "-v", "app_password=s3cret'quoted", "-v", "namespace=default",
        "-f", str(DOCKER / "roles.sql"),
    ]  # fmt: skip
    try:
        for _ in range(2):  # idempotent: the setup service may run again
            subprocess.run(command, check=True, capture_output=True, text=True)
        with pgmem.connect(dsn) as conn:
            row = conn.execute(
                "SELECT r.rolcanlogin, pg_has_role(r.oid, 'pgmem_writer', 'MEMBER'),"
                " pg_has_role(r.oid, 'pgmem_admin', 'MEMBER'), r.rolsuper"
                " FROM pg_roles AS r WHERE r.rolname = %s",
                (role,),
            ).fetchone()
            assert row == (True, True, False, False)
            grants = conn.execute(
                "SELECT g.namespace FROM pgmem.namespace_grants AS g JOIN pg_roles AS r ON r.oid = g.role_oid"
                " WHERE r.rolname = %s",
                (role,),
            ).fetchall()
            assert grants == [("default",)]
            pgmem.register_model(conn)  # what the setup service does after migrating

        # The application side of docs/docker.md, as the login role the script made.
        block = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "docker.md").read_text(), flags=re.DOTALL)[0]
        url = "postgresql://pgmem_app:change-me-too@127.0.0.1:5432/pgmem"
        assert url in block
        output = io.StringIO()
        with contextlib.redirect_stdout(output):
            exec(compile(block.replace(url, psycopg.conninfo.make_conninfo(dsn, user=role)), "docker.md", "exec"), {})
        assert output.getvalue() == "Ada founded Acme.\n"
    finally:
        with psycopg.connect(server_dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


@pytest.mark.skipif(shutil.which("docker-compose") is None, reason="docker-compose (v1) is not installed")
@pytest.mark.parametrize("path", [COMPOSE, CITUS_COMPOSE], ids=["single-node", "citus"])
def test_docker_compose_validates_the_file(path: Path) -> None:
    environment = {"PGMEM_PASSWORD": "x", "PGMEM_APP_PASSWORD": "y", "PATH": "/usr/bin:/bin:/usr/local/bin"}
    result = subprocess.run(
        ["docker-compose", "-f", str(path), "config", "--quiet"],
        capture_output=True,
        text=True,
        env=environment,
        check=False,
    )
    assert result.returncode == 0, result.stderr
