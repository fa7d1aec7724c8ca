package grpclimit_test

import (
	"context"
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/sluicehq/sluice/grpclimit"
)

func keyOf(t *testing.T, f grpclimit.Key, md metadata.MD, method string) (string, bool) {
	t.Helper()
	ctx := metadata.NewIncomingContext(context.Background(), md)
	k, ok := f(ctx, method, []byte("prefix:"))
	return string(k), ok
}

// TestKeyFuncs: the keys the built-in functions append, and calls that have none.
func TestKeyFuncs(t *testing.T) {
	tenantMethod := grpclimit.Keys(grpclimit.KeyMetadata("Tenant"), grpclimit.KeyMethod())
	for _, tc := range []struct {
		name   string
		f      grpclimit.Key
		md     metadata.MD
		want   string
		wantOK bool
	}{
		{"metadata", grpclimit.KeyMetadata("X-Api-Key"), metadata.Pairs("x-api-key", "k1", "x-api-key", "k2"), "prefix:k1", true},
		{"metadata missing", grpclimit.KeyMetadata("x-api-key"), metadata.Pairs("other", "v"), "prefix:", false},
		{"metadata empty", grpclimit.KeyMetadata("x-api-key"), metadata.Pairs("x-api-key", ""), "prefix:", false},
		{"method", grpclimit.KeyMethod(), nil, "prefix:/a.S/M", true},
		{"compose", tenantMethod, metadata.Pairs("tenant", "acme"), "prefix:4:acme|6:/a.S/M", true},
		{"compose missing part", tenantMethod, nil, "prefix:", false},
	} {
		got, ok := keyOf(t, tc.f, tc.md, "/a.S/M")
		if ok != tc.wantOK || (ok && got != tc.want) {
			t.Errorf("%s: %q %v, want %q %v", tc.name, got, ok, tc.want, tc.wantOK)
		}
	}
}

// TestComposeInjective: values that contain the separator cannot make two combinations
// share a key (a client choosing its tenant cannot spend another tenant's budget).
func TestComposeInjective(t *testing.T) {
	f := grpclimit.Keys(grpclimit.KeyMetadata("a"), grpclimit.KeyMetadata("b"))
	seen := map[string][2]string{}
	vals := []string{"x", "x|", "|x", "1:x", "x|1:y", "y", "1:", "12", "x|2:1:y"}
	for _, a := range vals {
		for _, b := range vals {
			k, ok := keyOf(t, f, metadata.Pairs("a", a, "b", b), "/a.S/M")
			if !ok {
				t.Fatalf("(%q, %q): no key", a, b)
			}
			if prev, dup := seen[k]; dup {
				t.Errorf("(%q, %q) and %q share the key %q", a, b, prev, k)
			}
			seen[k] = [2]string{a, b}
		}
	}
}
