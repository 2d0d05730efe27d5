package apply

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"
	"github.com/walapply/walapply/apply/internal/registry"
	"github.com/walapply/walapply/internal/secret"
	"github.com/walapply/walapply/migrations"
	"github.com/walapply/walapply/protocol"
)

// prepareTarget brings the target's walapply schema up to date on conn
// (the session's control connection): one query when it already is, a
// few round trips when it is not (migrations.UpConn).
// target is the target's connection string, kept out of the error.
func prepareTarget(ctx context.Context, conn *pgx.Conn, target string) error {
	if err := migrations.UpConn(ctx, conn); err != nil {
		return fmt.Errorf("migrating the walapply schema on the target: %w", secret.Error(err, target))
	}
	return nil
}

// oneShot is the query mode of the statements a start runs once on the
// control connection (registry.OneShot).
const oneShot = registry.OneShot

// ErrWrongSource is returned when the source is not the cluster whose
// changes the target's origin progress belongs to.
var ErrWrongSource = errors.New("apply: source does not match this applier's recorded source")

// ErrWrongSlot is returned when a start names another slot than the one the
// applier is bound to (DESIGN.md invariant 9; registry.Register).
var ErrWrongSlot = registry.ErrWrongSlot

// ErrOriginTaken is returned when a new applier's replication origin
// already holds progress that no applier of this database recorded
// (registry.Register).
var ErrOriginTaken = registry.ErrOriginTaken

// registerApplier records this applier in walapply.appliers, or checks that
// its slot is the one recorded (registry.Register). It runs before the slot
// is looked up or created, so a start refused for naming another slot
// creates no slot either. The refusals are permanent.
func registerApplier(ctx context.Context, conn *pgx.Conn, a registry.Applier, sys protocol.SystemInfo, log zerolog.Logger) error {
	err := registry.Register(ctx, conn, a, sys, log)
	if errors.Is(err, ErrWrongSlot) || errors.Is(err, ErrOriginTaken) {
		return &PermanentError{Err: err}
	}
	return err
}
