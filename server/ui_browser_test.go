package server_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice/internal/testenv"
)

// TestUIInHeadlessBrowser loads /ui in Debian's chromium (SLUICE_CHROMIUM, set by
// scripts/test.sh) against a running server under a bounded load: the denied key appears,
// as text, both as the server rendered it and after the page's script refreshed it from
// /v1/top. The screenshot is kept at $SLUICE_UI_SCREENSHOT, else in the OS temporary
// directory (the path is logged).
func TestUIInHeadlessBrowser(t *testing.T) {
	chromium := testenv.Get(t, "SLUICE_CHROMIUM")
	srv := startReal(t, viewRules, "memory")
	conn, err := grpc.NewClient(srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := rlsv3.NewRateLimitServiceClient(conn)

	// carol stays within her limit.
	if _, err := client.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "web", Descriptors: descs(desc("user", "carol"))}); err != nil {
		t.Fatal(err)
	}
	// Bounded load: 3 callers, 50 requests/s each, until the browser is done (at most 60 s).
	ctx, stop := context.WithTimeout(context.Background(), 60*time.Second)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for {
				product := "p" + strconv.Itoa(i)
				_, _ = client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "web", Descriptors: descs(desc("user", evilKey), desc("product", product))})
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
			}
		}()
	}
	defer func() { stop(); wg.Wait() }()
	time.Sleep(500 * time.Millisecond) // let the load be seen: the page shows rates

	url := "http://" + srv.HTTPAddr() + "/ui"
	dom := runChromium(t, chromium, "--dump-dom", "--virtual-time-budget=5000", url)
	escaped := "web|user=&lt;script&gt;alert(1)&lt;/script&gt;"
	if !strings.Contains(dom, escaped) {
		t.Errorf("the denied key is not on the page:\n%s", dom)
	}
	if strings.Contains(dom, evilKey) || strings.Count(dom, "<script") != 1 {
		t.Errorf("the key's <script> became markup:\n%s", dom)
	}
	if !strings.Contains(dom, `data-refreshed="`) {
		t.Errorf("the page's script did not refresh the view from /v1/top:\n%s", dom)
	}
	denied := dom[strings.Index(dom, `id="denied"`):]
	denied = denied[:strings.Index(denied, "</tbody>")]
	if !strings.Contains(denied, escaped) || strings.Contains(denied, "carol") {
		t.Errorf("keys denied now: want the evil key, not carol's:\n%s", denied)
	}
	if !strings.Contains(dom, "web|user=carol") {
		t.Errorf("carol's key is not among the rule's top keys:\n%s", dom)
	}

	shot := os.Getenv("SLUICE_UI_SCREENSHOT")
	if shot == "" {
		shot = filepath.Join(os.TempDir(), "sluice-ui-screenshot.png")
	}
	runChromium(t, chromium, "--screenshot="+shot, "--window-size=1280,900", "--virtual-time-budget=3000", url)
	if st, err := os.Stat(shot); err != nil || st.Size() == 0 {
		t.Fatalf("no screenshot at %s: %v", shot, err)
	}
	t.Logf("screenshot of /ui under load: %s", shot)
}

func descs(ds ...*rlcommon.RateLimitDescriptor) []*rlcommon.RateLimitDescriptor { return ds }

// runChromium runs headless chromium with args and returns its standard output.
func runChromium(t *testing.T, chromium string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--user-data-dir=" + t.TempDir()}
	cmd := exec.CommandContext(ctx, chromium, append(base, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return string(out)
}
