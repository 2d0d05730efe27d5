-- Conflicts met while applying, recorded inside the transaction that met
-- them (so a row here exists exactly when the change it describes was
-- applied, skipped or resolved): one row per conflicting source change.
-- Kinds follow PostgreSQL 18's subscriber: insert_exists, update_exists,
-- update_missing, delete_missing; and skipped_by_user for a transaction
-- skipped with --skip-lsn.

-- +goose Up
CREATE TABLE walapply.conflicts (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    applier     text NOT NULL,
    kind        text NOT NULL,
    relation    text,
    key         text,
    source_xid  bigint,
    commit_lsn  pg_lsn,
    resolution  text NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX conflicts_applier_idx ON walapply.conflicts (applier, recorded_at);

-- Raises the error that stops the applier on a conflict whose policy is
-- "error". It runs inside the statement that meets the conflict, so the
-- target transaction fails before its COMMIT: a check on the client after
-- the batch would come too late.
-- +goose StatementBegin
CREATE FUNCTION walapply.conflict_error(kind text, relation text, keys text) RETURNS int
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING
        ERRCODE = 'WA001',
        MESSAGE = format('conflict %s on %s, key %s', kind, relation, keys),
        HINT = format('its policy is error: fix the target''s row, or choose skip or apply with --on-conflict %s=..., then restart', kind);
END
$$;
-- +goose StatementEnd

COMMENT ON TABLE walapply.conflicts IS 'conflicts walapply met while applying, recorded in the applying transaction';
COMMENT ON COLUMN walapply.conflicts.key IS 'the row''s replica identity key as column=value pairs';
COMMENT ON COLUMN walapply.conflicts.commit_lsn IS 'commit LSN of the source transaction (what --skip-lsn takes)';
COMMENT ON COLUMN walapply.conflicts.resolution IS 'skipped, applied (the target was made to match the source), or error';

-- +goose Down
DROP FUNCTION walapply.conflict_error(text, text, text);
DROP TABLE walapply.conflicts;
