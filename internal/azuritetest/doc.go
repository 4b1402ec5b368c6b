// Package azuritetest runs Azurite (MIT, Microsoft's Azure Storage emulator, an npm package) on
// loopback for the tests of azblob:// sources and manifests: its blob service over a temporary
// directory, with telemetry off, reached as the emulator's well-known development account.
// `make test-emulators` installs it with npm into bin/azurite/; tests skip with a clear message when
// it (or node) is not there. Only tests import this package.
package azuritetest
