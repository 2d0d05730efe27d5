package ddl

import "strings"

// Split cuts a query string into its statements at the semicolons that
// end them, as the server's parser would: not inside quoted strings
// ('...', E'...', $tag$...$tag$), quoted identifiers or comments, nor
// inside a BEGIN ATOMIC body of CREATE FUNCTION or PROCEDURE. Statements
// are returned trimmed, without their semicolon; empty ones are left out.
func Split(q string) []string {
	var out []string
	start := 0
	depth := 0      // BEGIN ATOMIC ... END nesting
	var prev string // the previous word of the statement
	first := ""     // the statement's first word
	add := func(end int) {
		if s := strings.TrimSpace(q[start:end]); s != "" && strings.TrimSpace(stripComments(s)) != "" {
			out = append(out, s)
		}
		start, depth, prev, first = end+1, 0, "", ""
	}
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == '-' && i+1 < len(q) && q[i+1] == '-':
			for i < len(q) && q[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(q) && q[i+1] == '*':
			i = skipBlockComment(q, i)
		case c == '\'':
			escapes := i > 0 && (q[i-1] == 'E' || q[i-1] == 'e') && (i < 2 || !isIdent(q[i-2]))
			i = skipQuoted(q, i, '\'', escapes)
		case c == '"':
			i = skipQuoted(q, i, '"', false)
		case c == '$' && (i == 0 || !isIdent(q[i-1])):
			if end, ok := dollarTag(q, i); ok {
				tag := q[i:end]
				if j := strings.Index(q[end:], tag); j >= 0 {
					i = end + j + len(tag)
				} else {
					i = len(q)
				}
			} else {
				i++
			}
		case c == ';':
			if depth == 0 {
				add(i)
			}
			i++
		case isIdentStart(c):
			j := i
			for j < len(q) && isIdent(q[j]) {
				j++
			}
			w := strings.ToUpper(q[i:j])
			if first == "" {
				first = w
			}
			switch {
			case first == "CREATE" && prev == "BEGIN" && w == "ATOMIC":
				depth++
			case depth > 0 && w == "CASE":
				depth++
			case depth > 0 && w == "END":
				depth--
			}
			prev = w
			i = j
		default:
			i++
		}
	}
	add(len(q))
	return out
}

func isIdentStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

func isIdent(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' || c == '$' }

// skipQuoted returns the index after the quoted text starting at q[i]; a
// doubled quote is part of it, and with escapes so is a backslashed byte.
func skipQuoted(q string, i int, quote byte, escapes bool) int {
	for i++; i < len(q); i++ {
		switch {
		case escapes && q[i] == '\\':
			i++
		case q[i] == quote:
			if i+1 < len(q) && q[i+1] == quote {
				i++
				continue
			}
			return i + 1
		}
	}
	return len(q)
}

// skipBlockComment returns the index after the (nested) comment at q[i].
func skipBlockComment(q string, i int) int {
	depth := 0
	for i < len(q) {
		switch {
		case strings.HasPrefix(q[i:], "/*"):
			depth++
			i += 2
		case strings.HasPrefix(q[i:], "*/"):
			depth--
			i += 2
			if depth == 0 {
				return i
			}
		default:
			i++
		}
	}
	return len(q)
}

// dollarTag returns the end of a dollar-quote tag ($$ or $name$) at q[i].
func dollarTag(q string, i int) (int, bool) {
	j := i + 1
	if j < len(q) && q[j] >= '0' && q[j] <= '9' {
		return 0, false // a parameter, $1
	}
	for j < len(q) && q[j] != '$' {
		if !isIdent(q[j]) || q[j] == '$' {
			return 0, false
		}
		j++
	}
	if j >= len(q) {
		return 0, false
	}
	return j + 1, true
}

// stripComments removes leading comments and white space.
func stripComments(s string) string {
	for {
		s = strings.TrimLeft(s, " \t\r\n\f\v")
		switch {
		case strings.HasPrefix(s, "--"):
			if k := strings.IndexByte(s, '\n'); k >= 0 {
				s = s[k+1:]
			} else {
				return ""
			}
		case strings.HasPrefix(s, "/*"):
			s = s[skipBlockComment(s, 0):]
		default:
			return s
		}
	}
}

// InTransaction returns stmt as it can run inside a transaction block:
// CREATE [UNIQUE] INDEX CONCURRENTLY, DROP INDEX CONCURRENTLY and REINDEX
// ... CONCURRENTLY lose the CONCURRENTLY (the target runs it in the
// applying transaction, where a concurrent build is not allowed; it then
// holds its lock until that transaction commits). Other statements are
// returned unchanged.
func InTransaction(stmt string) string {
	s := stripComments(stmt)
	lead := len(stmt) - len(s)
	var words []string
	i := 0
	for len(words) < 6 && i < len(s) {
		for i < len(s) && strings.ContainsRune(" \t\r\n\f\v(", rune(s[i])) {
			i++
		}
		j := i
		for j < len(s) && isIdent(s[j]) {
			j++
		}
		if j == i {
			break
		}
		w := strings.ToUpper(s[i:j])
		words = append(words, w)
		if w == "CONCURRENTLY" {
			head := strings.Join(words[:len(words)-1], " ")
			switch head {
			case "CREATE INDEX", "CREATE UNIQUE INDEX", "DROP INDEX", "REINDEX INDEX", "REINDEX TABLE":
				return stmt[:lead+i] + strings.TrimLeft(s[j:], " \t\r\n")
			}
			return stmt
		}
		i = j
	}
	return stmt
}

// WithNoData returns a CREATE TABLE AS statement that creates its table
// empty: the stream brings the rows the source's statement wrote, and
// the target's own query would read the target's data a second time. An
// explicit WITH DATA becomes WITH NO DATA; otherwise WITH NO DATA is
// added on a line of its own (after any trailing comment).
func WithNoData(stmt string) string {
	t := strings.TrimRight(stmt, " \t\r\n;")
	u := strings.ToUpper(t)
	switch {
	case strings.HasSuffix(u, "WITH NO DATA"):
		return t
	case strings.HasSuffix(u, "WITH DATA") && len(u) > len("WITH DATA") && !isIdent(u[len(u)-len("WITH DATA")-1]):
		return t[:len(t)-len("DATA")] + "NO DATA"
	}
	return t + "\nWITH NO DATA"
}
