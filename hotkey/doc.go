// Package hotkey limits each value of a request parameter separately (a product id, a
// tenant, a query value) in bounded memory whatever the parameter's cardinality, and lets
// the cold values through without a store call.
//
// A Param keeps a Space-Saving sketch of TopK values for the current and the previous period
// of its rule. Space-Saving guarantees that a value it does not hold was seen at most min
// times, the smallest count it holds, and min <= total/TopK; a value it holds was seen at
// most its count. So Bound (held: count, else min; summed over both periods) is an upper
// bound of the value's requests over at least the last period.
//
// A request is admitted cold, with no store call, when Bound + n <= ColdLimit. Otherwise it
// goes to the store, which is first charged (Limiter.Settle) with the value's units admitted
// cold and not yet charged, an upper bound again. Hence:
//
//   - One instance never admits a value above its limit: cold admissions in a period are at
//     most ColdLimit <= limit, and once the value reaches the store the store has counted them.
//     The guarantee holds whatever the cardinality: when many distinct values fill the sketch,
//     min grows, Bound exceeds ColdLimit for every unseen value, and the values go to the store
//     (the saving shrinks; the limit holds). Cold values cost no store call only while
//     total/TopK stays below ColdLimit per period, the regime where the sketch pays.
//   - In a fleet of N instances each sees part of the traffic: a value may be admitted cold by
//     every instance before any charges the store, so a value can get up to limit + (N-1) x
//     ColdLimit units in a period (N x ColdLimit when no instance reaches the store). With
//     ColdLimit <= limit / N no value is ever admitted above its limit.
//
// Transports follow one protocol, written here once: Param.Observe a value (cold: admit it
// with Param.ColdDecision, no store call), Param.Charge the store with what a value turned hot
// owes before the store decides it, and tell the sketch what the store denied
// (Param.Denied). Batch runs it over the checks of a request decided together (httplimit,
// grpclimit); Param.Allow runs it for one value.
//
// Memory is two sketches of TopK entries (value, counts) per Param: flat in the number of
// distinct values (measured in the tests with 10M values).
package hotkey
