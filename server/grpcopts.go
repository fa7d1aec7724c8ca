package server

import (
	"os"
	"strconv"

	"google.golang.org/grpc"
)

// grpcOptions are the options of the RLS gRPC server (experiment knobs).
func (s *Server) grpcOptions() []grpc.ServerOption {
	opts := []grpc.ServerOption{grpc.MaxRecvMsgSize(int(s.cfg.MaxBodyBytes)), grpc.ForceServerCodecV2(newRLSCodec(&s.malformed))}
	if n, _ := strconv.Atoi(os.Getenv("X_WORKERS")); n > 0 {
		opts = append(opts, grpc.NumStreamWorkers(uint32(n)))
	}
	if os.Getenv("X_STATIC") != "" {
		opts = append(opts, grpc.StaticStreamWindowSize(1<<20), grpc.StaticConnWindowSize(1<<20))
	}
	return opts
}
