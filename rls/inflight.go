package rls

import "github.com/sluicehq/sluice/config"

// refuseInFlight returns an error naming the first limit of static rules c that has a
// max_in_flight, which an engine without Config.InFlight cannot enforce (rules read from
// files are refused by config.Options.RefuseInFlight).
func refuseInFlight(c *config.Config) error {
	if c == nil {
		return nil
	}
	for _, l := range c.Limits() {
		if l.InFlight != nil {
			return invalid("rules: %s:%d: %s: max_in_flight is not enforced here: the RLS protocol has no request-finished signal (sluice proxy and the middleware enforce it)", l.File, l.Line, l.FullKey)
		}
	}
	return nil
}

// refuseGlobalNonWindows returns an error naming the first global limit of static rules c
// that is not counted in windows, which a regions store in async mode cannot decide (rules
// read from files are refused by config.Options.GlobalWindowsOnly).
func refuseGlobalNonWindows(c *config.Config) error {
	if c == nil {
		return nil
	}
	for _, l := range c.Limits() {
		for i, r := range l.Rules {
			if l.IsGlobal(i) && !config.CountsWindows(r) {
				return invalid("rules: %s:%d: %s: a global limit of %s: the regions' async mode counts windows (fixed_window, sliding_window)", l.File, l.Line, l.FullKey, r.Algorithm)
			}
		}
	}
	return nil
}
