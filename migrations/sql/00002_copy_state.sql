-- The initial copy (walapply run --copy): what has been copied, in which
-- snapshot, so that an interrupted copy restarts only the tables that did
-- not finish and the applier knows which changes those tables already hold.
--
-- walapply.copies has one row per applier whose copy started. The slot the
-- copy created exported a snapshot at consistent_point; once every table is
-- copied, the applier's replication origin is set to that point and
-- finished_at is set: streaming starts there. consistent_point is NULL
-- while the slot is being created (a crash then leaves a slot that the
-- next attempt drops and creates again).
--
-- walapply.copy_state has one row per published table. A table's copy and
-- its row turning 'done' commit in one target transaction, so 'done' means
-- the rows are there. copy_lsn and snapshot name the source snapshot the
-- table was read in: the slot's own snapshot for a copy that ran in one
-- go, a later one (exported by a temporary slot at copy_lsn) for a table
-- copied when a copy was resumed. The applier skips a change to such a
-- table when the source transaction that made it committed before copy_lsn
-- and is visible in snapshot (apply/copy_filter.go).

-- +goose Up
CREATE TABLE walapply.copies (
    applier          text PRIMARY KEY REFERENCES walapply.appliers (name) ON DELETE CASCADE,
    slot_name        text NOT NULL,
    consistent_point pg_lsn,
    started_at       timestamptz NOT NULL DEFAULT now(),
    finished_at      timestamptz
);

CREATE TABLE walapply.copy_state (
    applier     text NOT NULL REFERENCES walapply.copies (applier) ON DELETE CASCADE,
    schema_name text NOT NULL,
    table_name  text NOT NULL,
    status      text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'done')),
    rows        bigint,
    bytes       bigint,
    copy_lsn    pg_lsn,
    snapshot    text,
    finished_at timestamptz,
    PRIMARY KEY (applier, schema_name, table_name),
    CHECK (status = 'pending' OR (copy_lsn IS NOT NULL AND snapshot IS NOT NULL))
);

COMMENT ON TABLE walapply.copies IS 'initial copies (walapply run --copy), one per applier';
COMMENT ON COLUMN walapply.copies.consistent_point IS 'where the slot''s exported snapshot stands: streaming starts here once every table is copied';
COMMENT ON COLUMN walapply.copies.finished_at IS 'NULL while the copy is unfinished: run walapply run --copy again to finish it';
COMMENT ON TABLE walapply.copy_state IS 'the tables of an initial copy and how far each got';
COMMENT ON COLUMN walapply.copy_state.status IS 'pending, or done: the table''s rows and this row committed together';
COMMENT ON COLUMN walapply.copy_state.copy_lsn IS 'consistent point of the source snapshot the table was copied in';
COMMENT ON COLUMN walapply.copy_state.snapshot IS 'that snapshot as pg_snapshot text (xmin:xmax:xip,...)';
COMMENT ON COLUMN walapply.copy_state.bytes IS 'size of the rows in COPY text format';

-- +goose Down
DROP TABLE walapply.copy_state;
DROP TABLE walapply.copies;
