package server

// MalformedPending is the number of malformed requests whose error no handler took yet
// (tests check that none leak).
func (s *Server) MalformedPending() int {
	n := 0
	s.malformed.Range(func(any, any) bool { n++; return true })
	return n
}
