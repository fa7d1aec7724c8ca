package server

import (
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/sluicehq/sluice/rls"
)

// dynamicMetadata is the dynamic_metadata of an RLS response, as envoyproxy/ratelimit gives
// it with RESPONSE_DYNAMIC_METADATA (Config.ResponseDynamicMetadata): the request's domain,
// its descriptors (entries as "key=value", the limit override, the hits_addend), its
// hits_addend, and the metadata of the limits of the descriptors that passed (not over their
// limit), merged.
func dynamicMetadata(req *rlsv3.RateLimitRequest, ans *rls.Answer) *structpb.Struct {
	fields := map[string]*structpb.Value{"domain": structpb.NewStringValue(req.GetDomain())}
	descs := make([]*structpb.Value, 0, len(req.GetDescriptors()))
	for _, d := range req.GetDescriptors() {
		if d == nil {
			continue
		}
		entries := make([]*structpb.Value, 0, len(d.GetEntries()))
		for _, e := range d.GetEntries() {
			entries = append(entries, structpb.NewStringValue(e.GetKey()+"="+e.GetValue()))
		}
		df := map[string]*structpb.Value{"entries": structpb.NewListValue(&structpb.ListValue{Values: entries})}
		if l := d.GetLimit(); l != nil {
			df["limit"] = structpb.NewStringValue(l.String())
		}
		if h := d.GetHitsAddend(); h != nil {
			df["hitsAddend"] = structpb.NewNumberValue(float64(h.GetValue()))
		}
		descs = append(descs, structpb.NewStructValue(&structpb.Struct{Fields: df}))
	}
	fields["descriptors"] = structpb.NewListValue(&structpb.ListValue{Values: descs})
	if h := req.GetHitsAddend(); h != 0 {
		fields["hitsAddend"] = structpb.NewNumberValue(float64(h))
	}
	passed := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	for i := range ans.Verdicts {
		v := &ans.Verdicts[i]
		if v.Limit == nil || v.Limit.Unlimited || v.Code == rls.CodeOverLimit || len(v.Limit.Metadata) == 0 {
			continue
		}
		if md, err := structpb.NewStruct(v.Limit.Metadata); err == nil {
			mergeStruct(passed, md)
		}
	}
	if len(passed.Fields) > 0 {
		fields["metadata"] = structpb.NewStructValue(passed)
	}
	return &structpb.Struct{Fields: fields}
}

// mergeStruct merges src into dst: structs on both sides merge, recursively; any other
// value of src replaces dst's.
func mergeStruct(dst, src *structpb.Struct) {
	for k, v := range src.GetFields() {
		if d, s := dst.Fields[k].GetStructValue(), v.GetStructValue(); d != nil && s != nil {
			mergeStruct(d, s)
			continue
		}
		dst.Fields[k] = v
	}
}
