-- Migration 0010: the version is recorded in schema_version from now on, no longer in the
-- comment on runs (which stays 'crashresume schema 9': schema.sql says why). After this
-- file, agent_runtime.store.migrate writes the rows of the versions it brought a database through.
CREATE TABLE schema_version (
    version integer PRIMARY KEY CHECK (version > 0),
    how text NOT NULL CHECK (how IN ('created', 'adopted', 'migrated')),
    applied_at timestamptz NOT NULL DEFAULT now()
);
