package main

import (
	"strings"
	"testing"
)

// TestRegionsFlags: every problem of the regions' flags is named by its flag, with no
// password of a URL in the message.
func TestRegionsFlags(t *testing.T) {
	for _, tc := range []struct {
		f    regionsFlags
		want string
	}{
		{regionsFlags{region: "eu"}, "--region \"eu\": set --regions too"},
		{regionsFlags{list: "eu=redis://a:6379"}, "--region: which of --regions"},
		{regionsFlags{region: "eu", list: "eu"}, "--regions: want name=redis://host:port"},
		{regionsFlags{region: "eu", list: "eu=memcached://:s3cret@a:11211"}, `--regions: region "eu": want a redis URL`},
		{regionsFlags{region: "ap", list: "eu=redis://a:6379,us=redis://b:6379", mode: "escrow"}, `--region: "ap" is not one of --regions (eu, us)`},
		{regionsFlags{region: "eu", list: "eu=redis://a:6379", mode: "both"}, "--regions-mode: regions: mode: want escrow or async"},
		{regionsFlags{region: "eu", list: "eu=redis://a:6379", mode: "escrow", coordinator: "us"}, `--regions-coordinator: "us" is not one of --regions`},
	} {
		_, err := tc.f.parse()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.f, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%+v: the error shows the password: %v", tc.f, err)
		}
	}
	rs, err := (&regionsFlags{region: "us", list: "eu=redis://a:6379, us=rediss://:pw@b:6380", mode: "async"}).parse()
	if err != nil || len(rs) != 2 || rs[1].name != "us" || rs[1].url != "rediss://:pw@b:6380" {
		t.Fatalf("parse: %+v %v", rs, err)
	}
	if rs, err := (&regionsFlags{}).parse(); rs != nil || err != nil {
		t.Fatalf("no regions: %v %v, want none", rs, err)
	}
}
