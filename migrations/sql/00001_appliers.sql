-- The registry of appliers that write to this target database: one row per
-- applier, naming the source it follows so that a misconfigured restart
-- (another source cluster, another timeline, another slot) is caught before
-- anything is applied.
--
-- The schema walapply itself is created by migrations.Up before goose runs,
-- because goose's version table lives in it.

-- +goose Up
CREATE TABLE walapply.appliers (
    name             text PRIMARY KEY,
    slot_name        text NOT NULL,
    publications     text[] NOT NULL,
    origin_name      text NOT NULL UNIQUE,
    source_system_id text NOT NULL,
    source_timeline  int NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz
);

COMMENT ON TABLE walapply.appliers IS 'walapply appliers that replicate into this database';
COMMENT ON COLUMN walapply.appliers.slot_name IS 'logical replication slot on the source';
COMMENT ON COLUMN walapply.appliers.publications IS 'publications the applier subscribes to';
COMMENT ON COLUMN walapply.appliers.origin_name IS 'replication origin on this database that records the applier''s progress';
COMMENT ON COLUMN walapply.appliers.source_system_id IS 'system identifier of the source cluster (IDENTIFY_SYSTEM)';
COMMENT ON COLUMN walapply.appliers.source_timeline IS 'timeline of the source when the applier was created';

-- +goose Down
DROP TABLE walapply.appliers;
