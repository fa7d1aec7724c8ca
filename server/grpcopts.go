package server

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// grpcOptions are the options of the RLS gRPC server. Everything here is scoped to this
// server: an application embedding it keeps its own codecs and settings.
func (s *Server) grpcOptions() []grpc.ServerOption {
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(int(s.cfg.MaxBodyBytes)),
		grpc.ForceServerCodecV2(newRLSCodec()),
	}
	if s.cfg.GRPCMaxConnectionAge > 0 || s.cfg.GRPCMaxConnectionAgeGrace > 0 {
		opts = append(opts, grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionAge: s.cfg.GRPCMaxConnectionAge, MaxConnectionAgeGrace: s.cfg.GRPCMaxConnectionAgeGrace}))
	}
	if s.grpcCreds != nil {
		opts = append(opts, s.grpcCreds)
	}
	workers := s.cfg.StreamWorkers
	if workers == 0 {
		workers = DefaultStreamWorkers
	}
	if workers > 0 {
		opts = append(opts, grpc.NumStreamWorkers(uint32(workers)))
	}
	opts = append(opts, s.tracingOptions()...)
	return opts
}
