-- Where an applier run with --until was asked to stop, and whether it got
-- there (walapply run --until LSN|now, apply/until.go).
--
-- until_lsn is the position of the applier's last start with --until (NULL:
-- started without it); until_reached_at is when that run stopped there, with
-- every source transaction committed at or before until_lsn applied and
-- durable on the target (NULL: not reached, or not asked). Each start
-- rewrites both, so status only shows a stop position of the latest run.

-- +goose Up
ALTER TABLE walapply.appliers ADD COLUMN until_lsn pg_lsn, ADD COLUMN until_reached_at timestamptz;

COMMENT ON COLUMN walapply.appliers.until_lsn IS 'the --until position of the applier''s latest start (NULL: none)';
COMMENT ON COLUMN walapply.appliers.until_reached_at IS 'when that run stopped with everything committed at or before until_lsn applied (NULL: not reached)';

-- +goose Down
ALTER TABLE walapply.appliers DROP COLUMN until_reached_at, DROP COLUMN until_lsn;
