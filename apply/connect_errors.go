package apply

import (
	"errors"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// connectFailure is a failed connection explained: the attempt that
// decided it, what to do about it, and the original error (its chain is
// what errors.Is, errors.As and IsTransient see).
//
// Connection failures an operator can act on.
//
// pgconn tries a connection string's hosts, and with sslmode=prefer (the
// default) or allow each host twice, with and without TLS; when all fail,
// its ConnectError lists every attempt, the first first. The first is
// rarely the cause: under sslmode=prefer against a server with ssl = off it
// is "server refused TLS connection", while the attempt that counts, the
// one without TLS, failed authentication. explainConnect leads with the
// last attempt, the one the fallback ended with, and adds what to change.
type connectFailure struct {
	who     string // as pgconn says it: "failed to connect to `user=... database=...`"
	cause   error  // the last attempt
	hint    string
	earlier []string // the other attempts, for the record
	err     error    // pgconn's ConnectError
}

func (e *connectFailure) Error() string {
	var b strings.Builder
	b.WriteString(e.who)
	b.WriteString(": ")
	b.WriteString(e.cause.Error())
	if e.hint != "" {
		b.WriteString(": ")
		b.WriteString(e.hint)
	}
	if len(e.earlier) > 0 {
		b.WriteString(" (earlier attempts: ")
		b.WriteString(strings.Join(e.earlier, "; "))
		b.WriteString(")")
	}
	return b.String()
}

func (e *connectFailure) Unwrap() error { return e.err }

// connectAttempts returns the attempts of a pgconn ConnectError inside err,
// the first first; nil when err holds none.
func connectAttempts(err error) []error {
	var ce *pgconn.ConnectError
	if !errors.As(err, &ce) {
		return nil
	}
	inner := ce.Unwrap()
	for inner != nil {
		if j, ok := inner.(interface{ Unwrap() []error }); ok {
			return j.Unwrap()
		}
		// "hostname resolving error: %w" around the join.
		if strings.HasPrefix(inner.Error(), "hostname resolving error") {
			if w, ok := inner.(interface{ Unwrap() error }); ok {
				inner = w.Unwrap()
				continue
			}
		}
		break
	}
	return []error{inner}
}

// explainConnect returns err, from connecting to a server, explained (see
// connectFailure); other errors unchanged.
func explainConnect(err error) error {
	attempts := connectAttempts(err)
	if len(attempts) == 0 || attempts[len(attempts)-1] == nil {
		return err
	}
	var ce *pgconn.ConnectError
	errors.As(err, &ce)
	last := attempts[len(attempts)-1]
	f := &connectFailure{who: "failed to connect to `user=" + ce.Config.User + " database=" + ce.Config.Database + "`", cause: last, hint: connectHint(last), err: err}
	for _, a := range attempts[:len(attempts)-1] {
		if a != nil && a.Error() != last.Error() {
			f.earlier = append(f.earlier, a.Error())
		}
	}
	return f
}

// connectHint says what to change for one attempt's failure.
func connectHint(err error) string {
	var pgErr *pgconn.PgError
	var dns *net.DNSError
	switch {
	case errors.As(err, &pgErr):
		switch {
		case pgErr.Code == "28P01":
			return "check the user and password of the connection string (or ~/.pgpass, PGPASSWORD) and the password of the role on that server"
		case pgErr.Code == "28000":
			return "the server's pg_hba.conf has no line that lets this user connect from here to this database (for the source's replication connection: a line for the database, method other than reject); add one and reload the server"
		case pgErr.Code == "3D000":
			return "the database of the connection string does not exist on that server"
		case pgErr.Code == "53300" && strings.Contains(pgErr.Message, "max_wal_senders"):
			return "every WAL sender of the source is in use: raise max_wal_senders on the source (a restart is needed; every walapply, subscriber and standby uses one), or stop one"
		case pgErr.Code == "53300":
			return "the server has no free connection: raise max_connections or close connections"
		case pgErr.Code == "57P03":
			return "the server is starting up or shutting down"
		}
	case errors.As(err, &dns):
		return "the host name does not resolve: check the host of the connection string (and the DNS)"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "nothing listens there: check that the server runs, and the host and port of the connection string (the server's listen_addresses and port)"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "the host cannot be reached: check the host of the connection string and the network between (routes, firewall)"
	case pgconn.Timeout(err) || errors.Is(err, syscall.ETIMEDOUT):
		return "no answer in time: check the host and port of the connection string and the network between (a firewall that drops packets)"
	case strings.Contains(err.Error(), "server refused TLS connection"):
		return "the server does not do TLS (ssl = off): turn ssl on there, or use sslmode=prefer or disable in the connection string"
	case isTLSFailure(err):
		return "the TLS connection was rejected: check sslmode, sslrootcert, the server's certificate and its host name (and sslcert/sslkey if the server asks for a client certificate)"
	}
	return ""
}
