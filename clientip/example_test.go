package clientip_test

import (
	"fmt"

	"github.com/sluicehq/sluice/clientip"
)

func ExampleResolver_Resolve() {
	r, err := clientip.New([]string{"10.0.0.0/8"}) // the load balancers
	if err != nil {
		panic(err)
	}
	// The balancer 10.0.0.5 appended the client it saw; the client forged the entry before it.
	fmt.Println(r.Resolve("10.0.0.5:41000", []string{"6.6.6.6, 203.0.113.7"}, nil))
	// A client talking to us directly cannot claim another address.
	fmt.Println(r.Resolve("198.51.100.9:5000", []string{"203.0.113.7"}, nil))
	// Forwarded (RFC 7239), IPv6 grouped by /64 for rate-limit keys.
	a := r.Resolve("10.0.0.5:41000", nil, []string{`for="[2001:db8:1:2::77]:4711";proto=https`})
	fmt.Println(a, string(clientip.AppendKey(nil, a, 64)))
	// Output:
	// 203.0.113.7
	// 198.51.100.9
	// 2001:db8:1:2::77 2001:db8:1:2::/64
}
