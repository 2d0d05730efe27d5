package apply

import (
	"context"
	"fmt"
	"slices"

	"github.com/walapply/walapply/apply/internal/engine"
	"github.com/walapply/walapply/apply/internal/initcopy"
	"github.com/walapply/walapply/apply/internal/sqlgen"
	"github.com/walapply/walapply/protocol"
)

// startSync checks and records a table found in the stream and starts its
// copy. It returns nil when the table is not published now (the session
// then ends, and the next start sorts it out).
func (s *session) startSync(ctx context.Context, n sqlgen.Rel) (*engine.TableSync, error) {
	cfg := s.cfg
	_, release, tables, err := s.publishedNow(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	i := slices.IndexFunc(tables, func(t *initcopy.Table) bool { return t.Rel == n })
	if i < 0 {
		return nil, nil
	}
	t := tables[i]
	if err := initcopy.MarkRanged(ctx, s.control, cfg.Name, []*initcopy.Table{t}); err != nil {
		return nil, err
	}
	if err := checkTargetTables(ctx, s.control, []*initcopy.Table{t}, []*initcopy.Table{t}); err != nil {
		return nil, err
	}
	if err := upsertTables(ctx, s.control, cfg.Name, []sqlgen.Rel{n}, initcopy.StatusPending); err != nil {
		return nil, fmt.Errorf("recording newly published table %s in walapply.copy_state on the target: %w", t, err)
	}
	version := s.source.ServerVersion()
	ts := engine.StartTableSync(ctx, n, t, func(ctx context.Context) error { return s.copyInBackground(ctx, t, version) })
	cfg.Logger.Info().Str("relation", sqlgen.LogRelation(t.Schema, t.Name)).
		Msg("newly published table in the stream: copying it while the other tables are applied; its changes are set aside until the copy is done")
	return ts, nil
}

// copyInBackground copies one table in a snapshot of its own and commits
// it 'copied'.
func (s *session) copyInBackground(ctx context.Context, t *initcopy.Table, version int) error {
	cfg := s.cfg
	rc, err := protocol.ConnectReplication(ctx, cfg.Source, cfg.replicationName("copy slot"))
	if err != nil {
		return fmt.Errorf("connecting to the source to copy newly published table %s: %w", t, err)
	}
	defer rc.Close(context.WithoutCancel(ctx))
	// A target connection of its own for the copier's bookkeeping (the
	// session's control connection belongs to the session's goroutine).
	control, err := connectTarget(ctx, cfg, "refresh")
	if err != nil {
		return err
	}
	defer control.Close(context.WithoutCancel(ctx))
	c := &copier{cfg: cfg, control: control, origin: s.origin, rc: rc, act: initcopy.Resume, version: version, copiedAs: initcopy.StatusCopied}
	point, snapshot, err := c.createTempSlot(ctx)
	if err != nil {
		return err
	}
	c.prog = newCopyProgress(cfg, 1, 0, []*initcopy.Table{t})
	return c.copyTables(ctx, []*initcopy.Table{t}, point, snapshot)
}

// catchUpReady catches up a table whose background copy finished, when
// the session is at a transaction boundary.
func (s *session) catchUpReady(ctx context.Context) error {
	ts, err := s.applier.ReadySync()
	if err != nil || ts == nil {
		return err
	}
	// Everything received so far committed and settled: the origin is at
	// the last applied transaction.
	if err := s.commitAndSettle(ctx); err != nil {
		return err
	}
	return s.catchUp(ctx, ts)
}

// catchUp applies a copied table's set-aside changes that its snapshot
// does not hold and turns it 'done', in one target transaction; the
// session is at a transaction boundary with nothing in flight.
func (s *session) catchUp(ctx context.Context, ts *engine.TableSync) error {
	a, cfg := s.applier, s.cfg
	var lsnText, snapText string
	err := s.control.QueryRow(ctx, `SELECT copy_lsn::text, snapshot FROM walapply.copy_state
		WHERE applier = $1 AND schema_name = $2 AND table_name = $3 AND status = 'copied'`, cfg.Name, ts.Name().Schema, ts.Name().Name).Scan(&lsnText, &snapText)
	if err != nil {
		return fmt.Errorf("reading the copy of table %s in walapply.copy_state: %w", ts.Table(), err)
	}
	ct := &engine.CopiedTable{}
	if ct.LSN, err = protocol.ParseLSN(lsnText); err != nil {
		return err
	}
	if ct.Snap, err = engine.ParseSnapshot(snapText); err != nil {
		return err
	}
	// A decoder of its own: the set-aside messages are decoded out of
	// their place in the stream.
	dec, err := protocol.NewDecoder(s.stream.DecoderOptions())
	if err != nil {
		return err
	}
	skipped, err := a.CatchUp(ctx, ts, ct, dec, cfg.Name)
	if err != nil {
		return err
	}
	ts.Wait()
	if err := initcopy.DropOrigins(ctx, s.control, cfg.Name); err != nil {
		return err
	}
	applied, _ := a.Applied()
	cfg.Logger.Info().Str("relation", sqlgen.LogRelation(ts.Name().Schema, ts.Name().Name)).Int("changes_applied", ts.Changes()-skipped).Int("changes_in_copy", skipped).
		Stringer("position", applied).Msg("newly published table copied and caught up with the stream")
	return nil
}
