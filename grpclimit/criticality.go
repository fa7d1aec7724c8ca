package grpclimit

import (
	"context"
	"log/slog"

	"google.golang.org/grpc/metadata"

	"github.com/sluicehq/sluice"
)

// CriticalityMetadata is the metadata key carrying a call's criticality class
// (CRITICAL_PLUS, CRITICAL, SHEDDABLE_PLUS, SHEDDABLE; the HTTP header X-Criticality).
const CriticalityMetadata = "x-criticality"

type classKey struct{}

// WithCriticality returns ctx carrying class c: the client interceptors send it with the
// calls made with ctx, and limits with Shares decide them by it.
func WithCriticality(ctx context.Context, c sluice.Criticality) context.Context {
	return context.WithValue(ctx, classKey{}, c)
}

// classText is the class a call carries, as text: set by WithCriticality, else received in
// the incoming metadata (a server handling a call passes its caller's class on to the calls it
// makes with the same context), else already in the outgoing metadata; "" when none.
func classText(ctx context.Context) string {
	if c, ok := ctx.Value(classKey{}).(sluice.Criticality); ok {
		return c.String()
	}
	if v := metadata.ValueFromIncomingContext(ctx, CriticalityMetadata); len(v) > 0 {
		return v[0]
	}
	if md, ok := metadata.FromOutgoingContext(ctx); ok {
		if v := md.Get(CriticalityMetadata); len(v) > 0 {
			return v[0]
		}
	}
	return ""
}

// class is the call's class: CRITICAL when it carries none, or an unknown one (logged once).
func (in *Interceptor) class(ctx context.Context) sluice.Criticality {
	v := classText(ctx)
	if v == "" {
		return sluice.Critical
	}
	c, ok := sluice.ParseCriticality(v)
	if !ok {
		in.classOnce.Do(func() {
			in.cfg.log.Warn("grpclimit: unknown criticality class, decided as CRITICAL (logged once)", slog.String("value", v))
		})
	}
	return c
}

// propagate adds the call's class to the outgoing metadata, when it has one not sent yet.
func propagate(ctx context.Context) context.Context {
	v := classText(ctx)
	if v == "" {
		return ctx
	}
	if md, ok := metadata.FromOutgoingContext(ctx); ok && len(md.Get(CriticalityMetadata)) > 0 {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, CriticalityMetadata, v)
}
