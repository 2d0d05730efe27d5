-- walapply run --copy --schema: the target's tables are created from the
-- source's pg_dump (apply/schema.go). schema_phase records how far that
-- went, so that a crash resumes there: NULL before the pre-data section
-- committed (it commits in one transaction with this column turning
-- 'pre-data'), 'pre-data' once the schemas, types, sequences and tables
-- are there, 'post-data' once the indexes, constraints and triggers are.

-- +goose Up
ALTER TABLE walapply.copies ADD COLUMN schema_phase text CHECK (schema_phase IN ('pre-data', 'post-data'));
COMMENT ON COLUMN walapply.copies.schema_phase IS 'how far creating the schema from pg_dump got: pre-data or post-data once that section of the source''s schema is on the target, NULL before';

-- +goose Down
ALTER TABLE walapply.copies DROP COLUMN schema_phase;
