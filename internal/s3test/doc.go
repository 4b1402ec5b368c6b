// Package s3test runs a real S3-compatible server, versitygw (Apache-2.0) with its posix backend over
// a temporary directory, on loopback for the tests of object-store sources. `make versitygw` (a
// dependency of `make test`) builds it into bin/; tests skip with a clear message when it is not
// there. Only tests import this package.
package s3test
