-- Tables added to or removed from the publications after an applier
-- started (what ALTER SUBSCRIPTION ... REFRESH PUBLICATION does for
-- PostgreSQL's subscriber): walapply.copy_state becomes the applier's list
-- of the tables it knows, like pg_subscription_rel, for every applier and
-- not only those made with --copy.
--
-- The states: 'pending' and 'done' as before (a table of the initial copy,
-- or one published later to an applier whose copy finished, copied in a
-- snapshot of its own); 'copied' for a table published later whose copy
-- committed while the stream went on and whose changes from the stream
-- are not applied yet (a start finds it so only after a crash, empties it
-- and copies it again); 'existing' for a table an applier without --copy
-- found published at its first start (the target was filled otherwise);
-- 'not_copied' for a table published later to an applier without --copy:
-- its changes are applied, its earlier rows were never copied.
--
-- published is false for a table no longer in the publications (its
-- changes stop; its rows on the target stay). Its row stays too: the
-- stream may still bring changes it made before it was removed, and a
-- table copied in a later snapshot keeps needing its copy_lsn and snapshot
-- to filter them (apply/copy_filter.go).

-- +goose Up
ALTER TABLE walapply.copy_state DROP CONSTRAINT copy_state_applier_fkey;
ALTER TABLE walapply.copy_state ADD CONSTRAINT copy_state_applier_fkey
    FOREIGN KEY (applier) REFERENCES walapply.appliers (name) ON DELETE CASCADE;
ALTER TABLE walapply.copy_state DROP CONSTRAINT copy_state_status_check;
ALTER TABLE walapply.copy_state ADD CONSTRAINT copy_state_status_check
    CHECK (status IN ('pending', 'copied', 'done', 'existing', 'not_copied'));
ALTER TABLE walapply.copy_state DROP CONSTRAINT copy_state_check;
ALTER TABLE walapply.copy_state ADD CONSTRAINT copy_state_check
    CHECK (status NOT IN ('copied', 'done') OR (copy_lsn IS NOT NULL AND snapshot IS NOT NULL));
ALTER TABLE walapply.copy_state ADD COLUMN published boolean NOT NULL DEFAULT true;
ALTER TABLE walapply.copy_state ADD COLUMN added_at timestamptz NOT NULL DEFAULT now();

COMMENT ON TABLE walapply.copy_state IS 'the published tables each applier knows and how far each got (like pg_subscription_rel)';
COMMENT ON COLUMN walapply.copy_state.status IS 'pending, copied (copied while the stream went on, not caught up with it yet), done (the table''s rows and this row committed together), existing (there at the first start of an applier without --copy) or not_copied (published later to an applier without --copy)';
COMMENT ON COLUMN walapply.copy_state.published IS 'false once the table is no longer in the applier''s publications';

-- +goose Down
ALTER TABLE walapply.copy_state DROP COLUMN added_at;
ALTER TABLE walapply.copy_state DROP COLUMN published;
DELETE FROM walapply.copy_state WHERE status NOT IN ('pending', 'done');
DELETE FROM walapply.copy_state s WHERE NOT EXISTS (SELECT 1 FROM walapply.copies c WHERE c.applier = s.applier);
ALTER TABLE walapply.copy_state DROP CONSTRAINT copy_state_check;
ALTER TABLE walapply.copy_state ADD CONSTRAINT copy_state_check
    CHECK (status = 'pending' OR (copy_lsn IS NOT NULL AND snapshot IS NOT NULL));
ALTER TABLE walapply.copy_state DROP CONSTRAINT copy_state_status_check;
ALTER TABLE walapply.copy_state ADD CONSTRAINT copy_state_status_check CHECK (status IN ('pending', 'done'));
ALTER TABLE walapply.copy_state DROP CONSTRAINT copy_state_applier_fkey;
ALTER TABLE walapply.copy_state ADD CONSTRAINT copy_state_applier_fkey
    FOREIGN KEY (applier) REFERENCES walapply.copies (applier) ON DELETE CASCADE;
