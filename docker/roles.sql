-- Login roles of a pgmem deployment (docker/compose.yaml runs it after `pgmem migrate`).
-- Idempotent. psql variables: app_role, app_password, namespace.
--
--   psql "$PGMEM_DSN" -v ON_ERROR_STOP=1 -v app_role=pgmem_app -v app_password=... \
--        -v namespace=default -f docker/roles.sql
--
-- The application's login role writes and reads one namespace (row-level security,
-- docs/security.md); it owns nothing and is not an admin.
SELECT format('CREATE ROLE %I LOGIN', :'app_role')
WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'app_role')
\gexec
SELECT format('ALTER ROLE %I LOGIN PASSWORD %L', :'app_role', :'app_password')
\gexec
SELECT format('GRANT pgmem_writer TO %I', :'app_role')
\gexec
SELECT pgmem.grant_namespace_v1(:'app_role', :'namespace');
