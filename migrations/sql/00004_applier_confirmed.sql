-- How far walapply confirmed an applier's slot beyond the origin's progress.
--
-- With nothing pending, walapply confirms to the source the position it has
-- received, which can lie past the last transaction the target applied
-- (keepalives, changes of tables not published). The slot's
-- confirmed_flush_lsn is then ahead of the origin's progress, legitimately.
-- confirmed_lsn records, durably and before the source hears of it, the
-- highest such position, so that a start can tell that case from a slot that
-- something else moved past what the target holds (apply/identity.go).
--
-- NULL: not known yet (a row written before this migration, or an applier
-- that has not started streaming); the next start records the slot's
-- position.

-- +goose Up
ALTER TABLE walapply.appliers ADD COLUMN confirmed_lsn pg_lsn;

COMMENT ON COLUMN walapply.appliers.confirmed_lsn IS 'highest position walapply confirmed to the slot beyond the origin''s progress, recorded before it was sent';

-- +goose Down
ALTER TABLE walapply.appliers DROP COLUMN confirmed_lsn;
