"""The deployment files of docker/, read by the tests (and by the testcontainers backend)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

DOCKER = Path(__file__).resolve().parent.parent / "docker"
COMPOSE = DOCKER / "compose.yaml"
CITUS_COMPOSE = DOCKER / "citus" / "compose.yaml"


def compose(path: Path = COMPOSE) -> dict[str, Any]:
    loaded = yaml.safe_load(path.read_text())
    if not isinstance(loaded, dict):
        raise ValueError(f"{path} is not a YAML mapping")
    return loaded


def database_service() -> dict[str, Any]:
    """The ``db`` service of docker/compose.yaml: image, command (settings), shm_size."""
    service: dict[str, Any] = compose()["services"]["db"]
    return service


def server_settings() -> dict[str, str]:
    """The ``-c name=value`` settings of the database service's command."""
    command = database_service()["command"]
    values = [command[i + 1] for i, part in enumerate(command) if part == "-c"]
    return dict(value.split("=", 1) for value in values)


def database_container() -> Any:
    """A testcontainers PostgreSQL with the image and settings of docker/compose.yaml."""
    try:
        from testcontainers.community.postgres import PostgresContainer
    except ImportError:  # testcontainers < 4.15
        from testcontainers.postgres import PostgresContainer
    service = database_service()
    container = PostgresContainer(service["image"], driver=None, dbname="pgmem")
    container.with_command(service["command"])
    container.with_kwargs(shm_size=service["shm_size"])
    return container
