package apply

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
)

// TestTLSFailuresArePermanent: TLS verification failures and refusals are
// configuration errors; a connection error around them does not make them
// transient, while plain connection errors stay transient.
func TestTLSFailuresArePermanent(t *testing.T) {
	// pgconn hands them up inside a connection error, which alone would
	// mean "retry"; a net.OpError plays that part here.
	conn := func(err error) error {
		return fmt.Errorf("connecting to the target: %w", &net.OpError{Op: "write", Net: "tcp", Err: err})
	}
	cases := []struct {
		name      string
		err       error
		transient bool
	}{
		{"host name", conn(&tls.CertificateVerificationError{Err: x509.HostnameError{Certificate: &x509.Certificate{}, Host: "127.0.0.1"}}), false},
		{"unknown authority", conn(x509.UnknownAuthorityError{}), false},
		{"expired", conn(x509.CertificateInvalidError{Reason: x509.Expired}), false},
		{"alert", conn(tls.AlertError(42)), false},
		{"server without TLS", conn(errors.New("server refused TLS connection")), false},
		{"connection refused", conn(syscall.ECONNREFUSED), true},
	}
	for _, c := range cases {
		if got := IsTransient(c.err); got != c.transient {
			t.Errorf("%s: IsTransient = %v, want %v (%v)", c.name, got, c.transient, c.err)
		}
	}
}
