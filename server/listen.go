package server

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"strings"
)

// listenAddr listens on addr: a TCP host:port, or "unix:" and a path for a Unix socket
// (envoyproxy/ratelimit's GRPC_UDS). A socket file left by an earlier run is removed first;
// any other file at the path is an error.
func listenAddr(addr string) (net.Listener, error) {
	path, ok := strings.CutPrefix(addr, "unix:")
	if !ok {
		return net.Listen("tcp", addr)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, errors.New("unix socket " + path + ": a file that is not a socket is in the way")
		}
		if err := os.Remove(path); err != nil {
			return nil, err
		}
	}
	return net.Listen("unix", path)
}
