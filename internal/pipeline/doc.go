// Package pipeline is the one limit pipeline under Sluice's library transports (httplimit,
// grpclimit), as package rls is under sluice serve and sluice proxy: a transport reads, from
// its request, which limits apply, their keys, the cost and the criticality class, and hands
// them to a Request; the pipeline does the rest as data, and the transport writes the Outcome
// in its protocol. Nothing in it knows HTTP or gRPC.
//
// The steps, in order, for one request:
//
//  1. limits: the Limits the transport declared, validated once (New: every problem a
//     *LimitError naming the limit's path, wrapping a *sluice.FieldError), each with its key
//     prefix and, for a hot parameter, its sketch;
//  2. keys: Request.Begin and Request.Add take each applicable limit's key as the transport
//     wrote it, and its cost and class;
//  3. hot keys: a hot parameter's value still cold in this process is admitted on the
//     sketch's bound, without a store call (package hotkey);
//  4. decide: the rate limits together, all or nothing (sluice.Limiter.AllowAll), then, for a
//     transport that shapes, a wait for the slot (WaitAll);
//  5. in-flight claims: once the rates admit the request, a slot of each in-flight limit,
//     all or none (package internal/inflight), held until Request.Finish;
//  6. failure policy: one handler, one semantics (Request.Decide's doc), for a store that
//     fails at step 4 or 5;
//  7. outcome: the Answer, the decision and the checks for the answer's headers, the
//     refused claim, and the events counted (Stats) and logged (one level per event).
//
// A Request lives from the transport's first read to its Finish: what completes after the
// handler (releasing the slots, settling a cost known late; budgets that commit a reserved
// cost or meter a stream) is done on it then.
package pipeline
