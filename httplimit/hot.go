package httplimit

import "net/http"

// KeyQuery counts requests by the first value of a query parameter, such as a product id: a
// parameter limited per value, usually with Limit.Hot. A request without it (or with an empty
// one) is not counted by the policy.
func KeyQuery(name string) Key {
	return KeyFunc(func(r *http.Request) (string, bool) {
		v := r.URL.Query().Get(name)
		return v, v != ""
	})
}
