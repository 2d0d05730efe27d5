-- Big tables copied in ranges (walapply run --copy, --copy-split-size;
-- apply/copy_ranges.go): a table larger than the split size is copied in
-- several ranges at once, by several copy workers, in the same snapshot.
--
-- walapply.copy_ranges has one row per range of such a table. split_by is
-- the single-column integer primary key the ranges are of, or 'ctid' for
-- block ranges; lo and hi bound the range (lo <= value < hi, or the block
-- numbers lo <= block < hi), NULL for an open end. A range's rows and its
-- row turning 'done' commit in one target transaction; the range whose
-- commit leaves none pending also turns the table's walapply.copy_state
-- row done (or copied). A start that finds a table with ranges but not
-- done empties the table on the target and copies it again, in ranges
-- again, in the new snapshot: rows copied in different snapshots could not
-- be brought up to date by the per-table copy filter.

-- +goose Up
CREATE TABLE walapply.copy_ranges (
    applier     text NOT NULL,
    schema_name text NOT NULL,
    table_name  text NOT NULL,
    range_no    int NOT NULL,
    split_by    text NOT NULL,
    lo          bigint,
    hi          bigint,
    status      text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'done')),
    rows        bigint,
    bytes       bigint,
    finished_at timestamptz,
    PRIMARY KEY (applier, schema_name, table_name, range_no),
    FOREIGN KEY (applier, schema_name, table_name) REFERENCES walapply.copy_state ON DELETE CASCADE
);

COMMENT ON TABLE walapply.copy_ranges IS 'the ranges a big table is copied in (--copy-split-size) and how far each got';
COMMENT ON COLUMN walapply.copy_ranges.split_by IS 'the integer primary key column the ranges are of, or ctid for block ranges';
COMMENT ON COLUMN walapply.copy_ranges.lo IS 'first key (or block) of the range; NULL: open';
COMMENT ON COLUMN walapply.copy_ranges.hi IS 'key (or block) after the range; NULL: open';

-- +goose Down
DROP TABLE walapply.copy_ranges;
