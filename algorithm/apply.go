package algorithm

import "github.com/sluicehq/sluice"

// Apply decides req on st, one key's state, at time now (Unix ns) under p, the compiled
// req.Rule: the one dispatch of a request's kind (sluice.Request.Kind) for every store that
// runs these states, so a store gets the matrix right by calling it. A settle is State.Settle;
// a take with a holdback is TakeHoldback; a budget step (reserve, extend, commit) is decided on
// the key's Ledger, which st must be (the store wraps the key's state with WithLedger); a
// take, a wait, a peek and a refund are State.Take, with MaxDelay (which window algorithms
// ignore). req must be valid (sluice.Request.Validate). The only errors are a budget step's:
// a reservation not open (NoReservation) or already open (ReservationOpen), which move
// nothing. The Redis scripts mirror the same dispatch (store/redis/lua).
func Apply(st State, now int64, p *Params, req *sluice.Request) (sluice.Decision, error) {
	switch k := req.Kind(); {
	case k == sluice.KindSettle:
		return st.Settle(now, p, req.N), nil
	case k == sluice.KindTakeHoldback:
		return TakeHoldback(st, now, p, req.N, req.Holdback), nil
	case k.Budget():
		l, ok := st.(*Ledger)
		if !ok {
			return sluice.Decision{}, errNotLedger
		}
		return l.step(now, p, req)
	}
	return st.Take(now, p, req.N, int64(req.MaxDelay)), nil
}

// TakeDecides reports whether Apply decides a request of kind k with State.Take alone, passing
// it the request's N and MaxDelay: a take, a wait, a peek or a refund. A store's hot path may
// call Take itself for those kinds and Apply for the others, saving a call that returns a
// Decision (8 ns of CPU on a 30 ns decision, measured).
func TakeDecides(k sluice.RequestKind) bool {
	return k != sluice.KindSettle && k != sluice.KindTakeHoldback && !k.Budget()
}
