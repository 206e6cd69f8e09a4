#!/bin/sh
# Register the workers, install pgmem on the coordinator, distribute its tables.
set -eu
psql "$PGMEM_DSN" -v ON_ERROR_STOP=1 <<'SQL'
CREATE EXTENSION IF NOT EXISTS citus;
CREATE EXTENSION IF NOT EXISTS vector;
SELECT citus_set_coordinator_host('coordinator', 5432);
SELECT citus_add_node('worker1', 5432) WHERE NOT EXISTS (SELECT 1 FROM pg_dist_node WHERE nodename = 'worker1');
SELECT citus_add_node('worker2', 5432) WHERE NOT EXISTS (SELECT 1 FROM pg_dist_node WHERE nodename = 'worker2');
SQL
pgmem migrate
# Distributing twice is an error: only when pgmem.notes is not distributed yet.
distributed=$(psql "$PGMEM_DSN" -Atc "SELECT count(*) FROM pg_dist_partition WHERE logicalrelid = 'pgmem.notes'::regclass")
if [ "$distributed" = "0" ]; then
    psql "$PGMEM_DSN" -v ON_ERROR_STOP=1 -f /citus/distribute.sql
fi
psql "$PGMEM_DSN" -Atc "SELECT logicalrelid, partmethod, colocationid FROM pg_dist_partition ORDER BY 1"
