package apply

import (
	"context"

	"github.com/walapply/walapply/twophase"
)

// SetRaw passes the message to be handled next as received: a streamed
// transaction's messages are spilled so (stream.go).
//
// This file holds what the run loop asks of the applier besides Handle and
// the flushes (applier_commit.go): methods instead of reaches into its
// fields, so that the loop keeps to the applier's methods (issue 19).
func (a *applier) SetRaw(data []byte) { a.stream.raw = data }

// InStreamBlock reports whether a stream block (Stream Start to Stream
// Stop) is open.
func (a *applier) InStreamBlock() bool { return a.machine.InStreamBlock() }

// StopBackground ends what runs beside the applying session: the tables'
// background copies (refresh_sync.go) and --ddl's source connection
// (ddl_source.go).
func (a *applier) StopBackground(ctx context.Context) {
	a.watch.stop()
	a.ddl.closeSource(ctx)
}

// TwoPhaseMode is how the applier names prepared transactions (prepare.go).
func (a *applier) TwoPhaseMode() twophase.Mode { return a.tp.mode }

// SetLeftovers hands the applier the prepared transactions an earlier run
// left on the target (prepare_recover.go); Leftovers returns them.
func (a *applier) SetLeftovers(l *twophase.Leftovers) { a.tp.leftovers = l }

// Leftovers is what SetLeftovers gave.
func (a *applier) Leftovers() *twophase.Leftovers { return a.tp.leftovers }
