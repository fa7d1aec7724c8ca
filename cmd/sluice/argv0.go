package main

import (
	"flag"
	"io"
	"path/filepath"
	"strings"
)

// peerCommand is the name of envoyproxy/ratelimit's binary (/bin/ratelimit), which Envoy
// Gateway and the peer's manifests run with no arguments; the image installs sluice there.
const peerCommand = "ratelimit"

// argsOf returns the arguments of run for a process started as argv: named ratelimit and
// given no subcommand (nothing, or flags), it is `sluice serve`. envoyproxy/ratelimit reads no
// argument at all, and deployments pass it some (Envoy AI Gateway's rate-limit Deployment:
// --quotaRateLimitServiceAddr=...): so named, arguments that are not serve's flags are left
// out and returned in ignored (names only: a value may be a secret), as the peer ignores them,
// instead of stopping sluice serve.
func argsOf(argv []string) (args, ignored []string) {
	args = argv[1:]
	if filepath.Base(argv[0]) != peerCommand || len(args) > 0 && (args[0] == "" || args[0][0] != '-') {
		return args, nil
	}
	fs, _ := serveFlagSet(io.Discard, func(string) (string, bool) { return "", false }) // the names only: no environment read, no DNS look-up
	kept := []string{"serve"}
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if name == "h" || name == "help" {
			kept = append(kept, a)
			continue
		}
		if !strings.HasPrefix(a, "-") || a == "-" || a == "--" {
			ignored = append(ignored, "(a value)") // perhaps a secret: not shown
			continue
		}
		fl := fs.Lookup(name)
		if fl == nil {
			ignored = append(ignored, "--"+name)
			continue
		}
		kept = append(kept, a)
		if _, isBool := fl.Value.(interface{ IsBoolFlag() bool }); !hasValue && !isBool && i+1 < len(args) {
			i++
			kept = append(kept, args[i]) // the flag's value
		}
	}
	return kept, ignored
}

// serveFlagSet is serve's flag set, its flags registered (serveFlags.register) with their
// hidden former names, which warn on w; getenv reads the environment (os.LookupEnv).
func serveFlagSet(w io.Writer, getenv func(string) (string, bool)) (*flag.FlagSet, *serveFlags) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	f := &serveFlags{peer: readPeerEnv(getenv)}
	f.register(fs)
	alias(fs, "response-headers", "headers", w, true, nil)
	return fs, f
}
