package main

import "path/filepath"

// peerCommand is the name of envoyproxy/ratelimit's binary (/bin/ratelimit), which Envoy
// Gateway and the peer's manifests run with no arguments; the image installs sluice there.
const peerCommand = "ratelimit"

// argsOf returns the arguments of run for a process started as argv: named ratelimit and
// given no subcommand (nothing, or flags), it is `sluice serve`.
func argsOf(argv []string) []string {
	args := argv[1:]
	if filepath.Base(argv[0]) == peerCommand && (len(args) == 0 || len(args[0]) > 0 && args[0][0] == '-') {
		return append([]string{"serve"}, args...)
	}
	return args
}
