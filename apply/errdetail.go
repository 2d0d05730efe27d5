package apply

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"strings"
)

// isTLSFailure reports whether err is a TLS failure that only a change of
// configuration can fix: a server certificate that does not verify
// (unknown authority, another host name, expired), a TLS alert from the
// server (it rejected the client certificate) or a server that does not do
// TLS where the connection string demands it. pgconn wraps these in the
// ConnectError that otherwise marks a retryable connection failure;
// retrying them would loop forever (DESIGN.md invariant 5).
//
// Of a connection that tried several times (sslmode=prefer: with TLS, then
// without), only the last attempt counts: the TLS refusal of the first is
// no failure when the second went on without TLS (connect_errors.go).
func isTLSFailure(err error) bool {
	if attempts := connectAttempts(err); len(attempts) > 1 && attempts[len(attempts)-1] != nil {
		err = attempts[len(attempts)-1]
	}
	var (
		verify    *tls.CertificateVerificationError
		host      x509.HostnameError
		authority x509.UnknownAuthorityError
		invalid   x509.CertificateInvalidError
		alert     tls.AlertError
	)
	if errors.As(err, &verify) || errors.As(err, &host) || errors.As(err, &authority) ||
		errors.As(err, &invalid) || errors.As(err, &alert) {
		return true
	}
	// pgconn returns this one as a plain string (sslmode=require or
	// verify-* against a server with ssl = off).
	return strings.Contains(err.Error(), "server refused TLS connection")
}
