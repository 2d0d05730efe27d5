package ddl

import (
	"errors"
	"fmt"
	"strings"
)

// notDDL are the first words of statements that never fire a DDL event
// trigger themselves but may run DDL inside (DO, CALL, SELECT f()) or
// only set up the session or transaction, or are utility commands that
// fire none (TRUNCATE, CLUSTER, REINDEX, which the capture leaves out).
// A SELECT with INTO creates a table and fires (tag SELECT INTO).
var notDDL = map[string]bool{
	"SELECT": true, "INSERT": true, "UPDATE": true, "DELETE": true, "MERGE": true, "WITH": true,
	"VALUES": true, "TABLE": true, "COPY": true, "DO": true, "CALL": true, "EXECUTE": true,
	"SET": true, "RESET": true, "SHOW": true, "BEGIN": true, "START": true, "COMMIT": true,
	"END": true, "ROLLBACK": true, "ABORT": true, "SAVEPOINT": true, "RELEASE": true,
	"EXPLAIN": true, "PREPARE": true, "DEALLOCATE": true, "LOCK": true, "LISTEN": true,
	"UNLISTEN": true, "NOTIFY": true, "DISCARD": true, "ANALYZE": true, "ANALYSE": true,
	"VACUUM": true, "CHECKPOINT": true, "FETCH": true, "MOVE": true, "CLOSE": true, "DECLARE": true,
	"TRUNCATE": true, "CLUSTER": true, "REINDEX": true, "LOAD": true,
}

// shared are the object words of commands on shared objects (and event
// triggers), which fire no event trigger.
var shared = map[string]bool{"DATABASE": true, "ROLE": true, "GROUP": true, "TABLESPACE": true, "EVENT": true, "SYSTEM": true, "PARAMETER": true}

// modifiers are words between a command's verb and its object kind that
// its command tag leaves out (CREATE OR REPLACE TEMP VIEW: CREATE VIEW).
var modifiers = map[string]bool{"OR": true, "REPLACE": true, "UNIQUE": true, "TEMP": true, "TEMPORARY": true,
	"UNLOGGED": true, "GLOBAL": true, "LOCAL": true, "RECURSIVE": true, "TRUSTED": true, "PROCEDURAL": true,
	"CONSTRAINT": true, "DEFAULT": true}

// Why a command message's query string cannot be replayed (Statement).
var (
	ErrNested   = errors.New("the DDL ran inside a function, procedure or DO block, which cannot be replayed without running the rest of it again")
	ErrSeveral  = errors.New("its query string holds several DDL statements and a ROLLBACK, which undoes the capture's count of them (send such DDL one statement at a time)")
	ErrMismatch = errors.New("the captured event does not match the statements of its query string")
)

// Statement returns the statement of a command message to execute on the
// target: the Seq-th statement of its query string that fires the event
// trigger (fires), checked against the event's command tag. It fails with
// ErrNested for DDL run inside a function, procedure or DO block (Seq 0,
// or a string without DDL), ErrSeveral for several DDL statements with a
// ROLLBACK among them, and ErrMismatch when the Seq-th statement is
// missing or another command than the tag says: replaying the whole
// string would run its other statements, whose changes the stream
// carries already, a second time, and a guess could run the wrong one.
func (m *Message) Statement() (string, error) {
	if m.Seq < 1 {
		return "", ErrNested
	}
	var ddl []string
	rollback := false
	for _, s := range Split(m.Query) {
		ws := words(s)
		if len(ws) > 0 && (ws[0] == "ROLLBACK" || ws[0] == "ABORT") {
			rollback = true
		}
		if fires(ws) {
			ddl = append(ddl, s)
		}
	}
	switch {
	case len(ddl) == 0:
		return "", ErrNested
	case len(ddl) > 1 && rollback:
		return "", ErrSeveral
	case m.Seq > len(ddl):
		return "", fmt.Errorf("%w: event %d (%s) of a string with %d DDL statements", ErrMismatch, m.Seq, m.Tag, len(ddl))
	}
	stmt := ddl[m.Seq-1]
	if m.Tag != "" && !tagMatches(words(stmt), m.Tag) {
		return "", fmt.Errorf("%w: event %d is %s, DDL statement %d of the string is %q", ErrMismatch, m.Seq, m.Tag, m.Seq, stmt)
	}
	return stmt, nil
}

// fires reports whether a statement (its words) fires ddl_command_end.
func fires(ws []string) bool {
	if len(ws) == 0 {
		return false
	}
	if ws[0] == "SELECT" {
		return has(ws, "INTO")
	}
	if notDDL[ws[0]] {
		return false
	}
	switch ws[0] {
	case "CREATE", "ALTER", "DROP":
		obj := objectWords(ws)
		if len(obj) > 0 && obj[0] == "USER" {
			return len(obj) > 1 && obj[1] == "MAPPING"
		}
		return len(obj) == 0 || !shared[obj[0]]
	case "COMMENT", "SECURITY":
		on := index(ws, "ON")
		return on < 0 || on+1 >= len(ws) || !shared[ws[on+1]]
	case "GRANT", "REVOKE":
		on := index(ws, "ON") // none: a role's membership
		return on >= 0 && on+1 < len(ws) && !shared[ws[on+1]]
	}
	return true
}

// tagMatches reports whether a statement (its words) is the command a
// command tag names.
func tagMatches(ws []string, tag string) bool {
	t := strings.Fields(strings.ToUpper(tag))
	switch tag {
	case "SELECT INTO":
		return len(ws) > 0 && ws[0] == "SELECT"
	case "CREATE TABLE AS":
		t = t[:2]
	}
	if len(t) == 0 || len(ws) == 0 || ws[0] != t[0] {
		return false
	}
	want, got := objectWords(t), objectWords(ws)
	if len(got) < len(want) {
		return false
	}
	for i, w := range want {
		if got[i] != w {
			return false
		}
	}
	return true
}

// objectWords returns the words after a command's verb, its modifiers
// left out.
func objectWords(ws []string) []string {
	i := 1
	for i < len(ws) && modifiers[ws[i]] {
		i++
	}
	return ws[i:]
}

func has(ws []string, w string) bool { return index(ws, w) >= 0 }

func index(ws []string, w string) int {
	for i, x := range ws {
		if x == w {
			return i
		}
	}
	return -1
}

// words returns a statement's key words and unquoted identifiers, upper
// case, in order: outside quoted strings, quoted identifiers and
// comments, at most 64 (enough for the kind of a command).
func words(s string) []string {
	var out []string
	for i := 0; i < len(s) && len(out) < 64; {
		c := s[i]
		switch {
		case c == '-' && i+1 < len(s) && s[i+1] == '-':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			i = skipBlockComment(s, i)
		case c == '\'':
			escapes := i > 0 && (s[i-1] == 'E' || s[i-1] == 'e') && (i < 2 || !isIdent(s[i-2]))
			i = skipQuoted(s, i, '\'', escapes)
		case c == '"':
			i = skipQuoted(s, i, '"', false)
		case c == '$' && (i == 0 || !isIdent(s[i-1])):
			if end, ok := dollarTag(s, i); ok {
				if j := strings.Index(s[end:], s[i:end]); j >= 0 {
					i = end + j + end - i
				} else {
					i = len(s)
				}
			} else {
				i++
			}
		case isIdentStart(c):
			j := i
			for j < len(s) && isIdent(s[j]) {
				j++
			}
			w := strings.ToUpper(s[i:j])
			if w == "E" && j < len(s) && s[j] == '\'' {
				i = j // the prefix of an E'' string
				continue
			}
			out = append(out, w)
			i = j
		default:
			i++
		}
	}
	return out
}
