package protocol

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pglogrepl"
)

// TimelineSwitch is one line of a timeline history file: timeline
// Timeline's WAL ends at Switch, where the next timeline of the history
// begins (a promotion or the end of a point-in-time recovery).
type TimelineSwitch struct {
	Timeline int32
	Switch   LSN
}

// ErrTimelineHistory is wrapped by the errors of ParseTimelineHistory.
var ErrTimelineHistory = errors.New("protocol: invalid timeline history")

// ParseTimelineHistory parses the content of a timeline history file
// (pg_wal/0000000N.history), as TIMELINE_HISTORY returns it: a line per
// ancestor timeline, oldest first, "<timeline> <switch point> <reason>"
// separated by white space (PostgreSQL writes tabs); blank lines and lines
// beginning with '#' carry nothing. Timelines must increase from one line
// to the next, as PostgreSQL requires of the file.
func ParseTimelineHistory(content []byte) ([]TimelineSwitch, error) {
	var out []TimelineSwitch
	for n, line := range bytes.Split(content, []byte("\n")) {
		text := strings.TrimSpace(string(line))
		if text == "" || text[0] == '#' {
			continue
		}
		f := strings.Fields(text)
		tli, err := strconv.ParseUint(f[0], 10, 32)
		if err != nil || tli == 0 || tli > 1<<31-1 {
			return nil, fmt.Errorf("%w: line %d: %q is not a timeline", ErrTimelineHistory, n+1, f[0])
		}
		if len(f) < 2 {
			return nil, fmt.Errorf("%w: line %d: timeline %d has no switch point", ErrTimelineHistory, n+1, tli)
		}
		at, err := ParseLSN(f[1])
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrTimelineHistory, n+1, err)
		}
		if k := len(out); k > 0 && (int32(tli) <= out[k-1].Timeline || at < out[k-1].Switch) {
			return nil, fmt.Errorf("%w: line %d: timeline %d at %s does not follow timeline %d at %s", ErrTimelineHistory, n+1, tli, at, out[k-1].Timeline, out[k-1].Switch)
		}
		out = append(out, TimelineSwitch{Timeline: int32(tli), Switch: at})
	}
	return out, nil
}

// TimelineHistory runs TIMELINE_HISTORY for timeline tli and parses the
// file it returns (ParseTimelineHistory). Timeline 1 has no history file
// (it has no ancestor): it returns nil without asking. Asking for a
// timeline whose file the source does not have is an error of the server
// (58P01, could not open file).
func (c *ReplConn) TimelineHistory(ctx context.Context, tli int32) ([]TimelineSwitch, error) {
	if tli <= 1 {
		return nil, nil
	}
	if err := c.ready(); err != nil {
		return nil, err
	}
	res, err := pglogrepl.TimelineHistory(ctx, c.pg, tli)
	if err != nil {
		return nil, fmt.Errorf("protocol: TIMELINE_HISTORY %d: %w", tli, err)
	}
	h, err := ParseTimelineHistory(res.Content)
	if err != nil {
		return nil, fmt.Errorf("protocol: TIMELINE_HISTORY %d (%s): %w", tli, res.FileName, err)
	}
	if k := len(h); k > 0 && h[k-1].Timeline >= tli {
		return nil, fmt.Errorf("protocol: TIMELINE_HISTORY %d (%s): %w: it names timeline %d as an ancestor", tli, res.FileName, ErrTimelineHistory, h[k-1].Timeline)
	}
	return h, nil
}
