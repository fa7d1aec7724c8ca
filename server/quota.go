package server

import "github.com/sluicehq/sluice/quota/rlqs"

// registerQuota serves the RLQS quota service (package quota/rlqs) on the gRPC server, over
// the server's rules (reloads apply at once).
func (s *Server) registerQuota() {
	qc := s.cfg.Quota
	qc.Rules = s.Rules
	qc.Observer = s.quotaMetrics
	if s.tracer != nil {
		qc.Tracer = s.tracer
	}
	if qc.Logger == nil {
		qc.Logger = s.log
	}
	s.quota = rlqs.New(qc)
	s.quota.Register(s.grpc)
}

// Quota returns the RLQS quota service, or nil when gRPC is disabled.
func (s *Server) Quota() *rlqs.Service { return s.quota }
