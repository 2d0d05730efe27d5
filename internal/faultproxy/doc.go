// Package faultproxy is a TCP proxy for tests that puts network faults
// between a PostgreSQL client and a server.
//
// A Proxy listens on 127.0.0.1 and forwards every connection it accepts to
// one server address. Tests point a client (walapply) at the proxy's address
// instead of the server's, and then, at moments of their choosing:
//
//   - DropAll resets every live connection (both sides see a reset), as a
//     network cut or a middlebox restart would;
//   - Refuse resets every new connection for a while, so the client cannot
//     reconnect yet; Cut is DropAll followed by Refuse;
//   - Stall stops forwarding, in both directions, for a while, without
//     closing anything: a network that black-holes packets. Stalling a
//     replication connection for longer than the source's
//     wal_sender_timeout makes the walsender give up on the client;
//   - HalfClose shuts down one direction of every live connection (a FIN
//     toward the client, or toward the server) while the other direction
//     keeps flowing;
//   - Corrupt damages one CopyData message of a replication stream on its
//     way from the server to the client: it flips a byte, or truncates the
//     message (keeping the framing valid), or tears the connection in the
//     middle of the message.
//
// # Finding the replication messages
//
// To damage a pgoutput message rather than the startup handshake or a
// query result, the server-to-client direction is parsed as the PostgreSQL
// wire protocol frames it: every message is a type byte and an Int32 length
// that counts itself but not the type byte. The exception is the handshake:
// the server answers an SSLRequest or a GSSENCRequest with one unframed
// byte, so the client-to-server direction is parsed up to the startup
// packet to know when such an answer is due ('S' or 'G' means that
// encryption follows: from then on nothing is parsed, and nothing can be
// damaged). A CopyData message ('d') whose payload starts with 'w' is
// XLogData: a 25-byte header ('w', WAL start, server WAL end, send time)
// followed by one pgoutput message, which is what Corruption.Match sees
// and what Corruption.Offset counts from.
//
// # What corruption tests can show
//
// pgoutput messages carry no checksum: a byte flipped inside a column value
// leaves the message well formed, and no decoder can notice it. Damage to
// the framing (a message type, a tuple marker, a flags byte, a count or a
// length) or a truncated message can be noticed, and that is what a
// subscriber must turn into a clear protocol error that applies and
// confirms nothing. Protecting the values themselves in transit is the job
// of TLS (sslmode=require or stronger), whose record MAC rejects any
// altered byte; through TLS this proxy can only drop, stall or tear
// connections.
package faultproxy
