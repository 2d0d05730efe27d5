-- The appliers running against this database, one row per running applier:
-- which walapply process (pid, host) holds the applier's running-applier
-- lock (apply/lease.go), through which target backend, since when. The
-- lock is the truth and the row only describes its holder: a row whose
-- backend_pid does not hold the lock (pg_locks) is left over from a process
-- that was killed, and the applier's next start overwrites it.

-- +goose Up
CREATE TABLE walapply.running (
    applier     text PRIMARY KEY,
    pid         int NOT NULL,
    host        text NOT NULL,
    backend_pid int NOT NULL,
    started_at  timestamptz NOT NULL DEFAULT now()
);

COMMENT ON TABLE walapply.running IS 'walapply processes that hold an applier''s running-applier lock on this database';
COMMENT ON COLUMN walapply.running.pid IS 'process id of the walapply process, on host';
COMMENT ON COLUMN walapply.running.host IS 'host name of the machine (or pod) the walapply process runs on';
COMMENT ON COLUMN walapply.running.backend_pid IS 'target backend (the control connection) that holds the advisory lock; the row is current only while it does';
COMMENT ON COLUMN walapply.running.started_at IS 'when that session took the lock';

-- +goose Down
DROP TABLE walapply.running;
