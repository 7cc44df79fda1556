-- Named queries of the local cluster (agent_runtime.localpg.pgcluster), run on the server's
-- own 'postgres' database before any crashresume schema exists.

-- name: cluster_data_directory
-- Which data directory answers on this port (another server may have taken it).
SHOW data_directory;

-- name: cluster_has_database
SELECT 1 FROM pg_database WHERE datname = 'crashresume';

-- name: cluster_create_database
-- The database every URL of a local cluster names (agent_runtime.localpg.pgcluster.DB_NAME).
CREATE DATABASE crashresume;

-- name: cluster_set_password
-- The superuser's password, as the SCRAM verifier agent_runtime.localpg.pgauth computed (a literal:
-- ALTER ROLE takes no parameters); the password itself never reaches the server.
ALTER ROLE postgres PASSWORD {verifier};

-- name: cluster_reload_conf
-- Reread pg_hba.conf after agent_runtime.localpg.pgauth rewrote it (new logins follow it).
SELECT pg_reload_conf();
