// Package tcpproxy is a loopback TCP proxy for fault tests: it forwards every connection it accepts
// to a target address and can cut all of them at once, or once a number of bytes has gone through
// toward the target, so a test can reset a client's connections in the middle of a stream
// deterministically.
package tcpproxy
