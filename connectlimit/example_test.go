package connectlimit_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/connectlimit"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memory"
)

// A Connect handler limits each API key to one call a second; the client reads the details
// of the call it was refused.
func Example() {
	clock := sluicetest.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	store, _ := memory.New(memory.WithClock(clock)) // omit WithClock outside tests
	defer store.Close()
	in, err := connectlimit.New(sluice.New(store), []connectlimit.Route{{
		Procedure: "", // every call; "/pkg.Service/" or "/pkg.Service/Method" for one service or procedure
		Limits:    []connectlimit.Limit{{Name: "per-key", Rule: sluice.TokenBucket(1, time.Second, 1), Key: connectlimit.KeyHeader("X-API-Key")}},
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	const procedure = "/example.v1.PingService/Ping"
	mux := http.NewServeMux()
	mux.Handle(procedure, connect.NewUnaryHandler(procedure, func(context.Context, *connect.Request[emptypb.Empty]) (*connect.Response[emptypb.Empty], error) {
		return connect.NewResponse(&emptypb.Empty{}), nil
	}, connect.WithInterceptors(in)))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	client := connect.NewClient[emptypb.Empty, emptypb.Empty](srv.Client(), srv.URL+procedure)
	for i := 1; i <= 2; i++ {
		req := connect.NewRequest(&emptypb.Empty{})
		req.Header().Set("X-API-Key", "alice")
		_, err := client.CallUnary(context.Background(), req)
		var ce *connect.Error
		if !errors.As(err, &ce) {
			fmt.Printf("call %d: ok\n", i)
			continue
		}
		fmt.Printf("call %d: %v, Retry-After %s\n", i, ce.Code(), ce.Meta().Get("Retry-After"))
		for _, d := range ce.Details() {
			switch v, _ := d.Value(); v := v.(type) {
			case *errdetails.RetryInfo:
				fmt.Println("  retry in", v.GetRetryDelay().AsDuration())
			case *errdetails.QuotaFailure:
				fmt.Println("  quota", v.GetViolations()[0].GetQuotaId())
			}
		}
	}
	// Output:
	// call 1: ok
	// call 2: resource_exhausted, Retry-After 1
	//   retry in 1s
	//   quota per-key
}
