package xds

import (
	"context"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
)

// adsStream is the client's side of one ADS stream of RateLimitConfig resources, State of
// the World: a first request, then each response answered by a request that ACKs it (its
// version, the version applied) or NACKs it (the version applied before, and why). It sees
// the versions and nonces that go-control-plane's sotw client keeps to itself, so that a
// refused version sent again can be told apart (Client.stream).
type adsStream struct {
	s       discovery.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	node    *core.Node
	applied string // version_info of the last snapshot ACKed on this stream
}

// openADS opens the stream and sends the first request.
func openADS(ctx context.Context, conn grpc.ClientConnInterface, node *core.Node) (*adsStream, error) {
	s, err := discovery.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		return nil, err
	}
	a := &adsStream{s: s, node: node}
	return a, a.send("", nil)
}

// recv waits for the next response.
func (a *adsStream) recv() (*discovery.DiscoveryResponse, error) { return a.s.Recv() }

// ack applies and acknowledges resp.
func (a *adsStream) ack(resp *discovery.DiscoveryResponse) error {
	a.applied = resp.GetVersionInfo()
	return a.send(resp.GetNonce(), nil)
}

// nack refuses resp, saying why (msg).
func (a *adsStream) nack(resp *discovery.DiscoveryResponse, msg string) error {
	return a.send(resp.GetNonce(), &statuspb.Status{Message: msg})
}

func (a *adsStream) send(nonce string, detail *statuspb.Status) error {
	return a.s.Send(&discovery.DiscoveryRequest{Node: a.node, VersionInfo: a.applied, TypeUrl: TypeURL,
		ResponseNonce: nonce, ErrorDetail: detail})
}
