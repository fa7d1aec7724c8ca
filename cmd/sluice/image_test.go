package main

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/sluicehq/sluice/internal/testenv"
)

// TestImage builds the image of the Containerfile with scripts/image.sh (buildah, nothing
// pulled from a registry) and runs it as Envoy Gateway runs envoyproxy/ratelimit's image:
// its entrypoint /bin/ratelimit with no arguments, the peer's environment and the rules
// mounted at RUNTIME_ROOT; it answers RLS as user 65532. SLUICE_BUILDAH names buildah
// (scripts/test.sh sets it); unset, the test skips locally and fails in CI.
func TestImage(t *testing.T) {
	buildah := testenv.Get(t, "SLUICE_BUILDAH")
	tag := "localhost/sluice-test:" + uniq()
	build := exec.Command("bash", "../../scripts/image.sh", tag)
	build.Env = append(os.Environ(), "BUILDAH="+buildah)
	var out bytes.Buffer
	build.Stdout, build.Stderr = &out, &out
	if err := build.Run(); err != nil {
		t.Fatalf("scripts/image.sh: %v\n%s", err, out.String())
	}
	t.Cleanup(func() { _ = exec.Command(buildah, "rmi", "-f", tag).Run() })

	// The image is what the peer's is: non-root, entrypoint /bin/ratelimit; it says where it
	// comes from (OCI labels: source, version, revision) and exposes the ports sluice listens
	// on in Envoy Gateway's environment, no other (issue 30).
	raw, err := exec.Command(buildah, "inspect", "--type", "image", tag).Output()
	var image struct {
		OCIv1 struct {
			Config struct {
				User         string
				Entrypoint   []string
				ExposedPorts map[string]struct{}
				Labels       map[string]string
			} `json:"config"`
		}
	}
	if err != nil || json.Unmarshal(raw, &image) != nil {
		t.Fatalf("buildah inspect %s: %v", tag, err)
	}
	conf := image.OCIv1.Config
	if conf.User != "65532:65532" || strings.Join(conf.Entrypoint, " ") != "/bin/ratelimit" {
		t.Errorf("image config %+v; want user 65532:65532 and entrypoint /bin/ratelimit", conf)
	}
	revision := strings.TrimSpace(gitOut(t, "rev-parse", "HEAD"))
	if l := conf.Labels; l["org.opencontainers.image.source"] != "https://github.com/sluicehq/sluice" ||
		!strings.HasPrefix(l["org.opencontainers.image.revision"], revision) || l["org.opencontainers.image.version"] == "" ||
		l["org.opencontainers.image.version"] == "unknown" {
		t.Errorf("OCI labels %v: want the source, the commit %s and a version", l, revision)
	}
	var exposed []string
	for p := range conf.ExposedPorts {
		exposed = append(exposed, p)
	}
	if want := peerListenPorts(t); strings.Join(sortedStrings(exposed), " ") != want {
		t.Errorf("EXPOSE %v, want the ports sluice listens on in Envoy Gateway's environment: %s", exposed, want)
	}
	ctrOut, err := exec.Command(buildah, "from", "--pull=never", tag).Output()
	if err != nil {
		t.Fatalf("buildah from: %v", err)
	}
	ctr := strings.TrimSpace(string(ctrOut))
	t.Cleanup(func() { _ = exec.Command(buildah, "rm", ctr).Run() })

	root := peerRuntime(t)
	grpcAddr, httpAddr := testenv.FreeAddr(t), testenv.FreeAddr(t)
	_, grpcPort, _ := net.SplitHostPort(grpcAddr)
	_, httpPort, _ := net.SplitHostPort(httpAddr)
	mark := "SLUICE_TEST_IMAGE_RUN=" + uniq() // finds the container's process to stop it
	args := []string{"run", "--isolation", "chroot", "-v", root + ":/data:ro"}
	for _, kv := range []string{"RUNTIME_ROOT=/data", "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_IGNOREDOTFILES=true",
		"HOST=127.0.0.1", "PORT=" + httpPort, "GRPC_HOST=127.0.0.1", "GRPC_PORT=" + grpcPort, "USE_STATSD=false",
		"LOG_LEVEL=info", "LOG_FORMAT=json", mark} {
		args = append(args, "--env", kv)
	}
	cmd := exec.Command(buildah, append(args, ctr, "--", "/bin/ratelimit")...) // its entrypoint (buildah run wants it named), no arguments
	t.Cleanup(func() { stopMarked(t, mark) })                                  // if it never said it serves
	s := startServeCmd(t, cmd, nil)
	t.Cleanup(func() { stopMarked(t, mark) }) // before startServeCmd's own cleanup: buildah does not pass SIGTERM on
	runPeerCases(t, s, "grpc", []peerCase{
		{"basic key1", rlReq("basic", 1, []string{"key1", "image"}), "OK; OK 50/SECOND rem=49"},
		{"an unknown domain", rlReq("foo", 1, []string{"hello", "world"}), "OK; OK rem=0"},
	})
	if uid := markedUID(t, mark); uid != 65532 {
		t.Errorf("the container's process runs as uid %d, want 65532", uid)
	}
	// `sluice version` names the version and the commit: stamped by scripts/image.sh, since
	// the build records no VCS information (GOFLAGS=-buildvcs=false here).
	version, err := exec.Command(buildah, "run", "--isolation", "chroot", ctr, "--", "/bin/ratelimit", "version").CombinedOutput()
	if err != nil || !strings.Contains(string(version), "commit "+revision) || strings.Contains(string(version), "(devel)") {
		t.Errorf("sluice version in the image: %q, %v; want a version and the commit %s", version, err, revision)
	}
}

// gitOut is the output of git args in the repository.
func gitOut(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", "../.."}, args...)...).Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return string(out)
}

// peerListenPorts are the ports serve listens on in Envoy Gateway's environment (its
// generated Deployment's env), "8080/tcp 8081/tcp"-style, sorted.
func peerListenPorts(t *testing.T) string {
	t.Helper()
	env := map[string]string{}
	for _, e := range deploymentContainer(t, egTracingDeployment, "envoy-ratelimit").Env {
		env[e.Name] = e.Value
	}
	e := readPeerEnv(func(name string) (string, bool) { v, ok := env[name]; return v, ok })
	var ports []string
	for _, flagName := range []string{"http-addr", "grpc-addr"} {
		_, port, err := net.SplitHostPort(e.defaults[flagName])
		if err != nil {
			t.Fatalf("%s in Envoy Gateway's environment: %q", flagName, e.defaults[flagName])
		}
		ports = append(ports, port+"/tcp")
	}
	return strings.Join(sortedStrings(ports), " ")
}

func sortedStrings(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// markedPIDs are the processes whose environment holds mark.
func markedPIDs(mark string) []int {
	var pids []int
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		env, err := os.ReadFile(filepath.Join(d, "environ"))
		if err != nil || !bytes.Contains(env, []byte("\x00"+mark+"\x00")) && !bytes.HasPrefix(env, []byte(mark+"\x00")) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(d)); err == nil && pid != os.Getpid() {
			pids = append(pids, pid)
		}
	}
	return pids
}

// stopMarked sends SIGTERM to the processes marked with mark (only the container's own: the
// mark is set by --env inside it).
func stopMarked(t *testing.T, mark string) {
	for _, pid := range markedPIDs(mark) {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
}

// markedUID is the real uid of the ratelimit process marked with mark (-1: none).
func markedUID(t *testing.T, mark string) int {
	for _, pid := range markedPIDs(mark) {
		comm, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
		status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		if err != nil || strings.TrimSpace(string(comm)) != peerCommand {
			continue
		}
		for _, line := range strings.Split(string(status), "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
				uid, _ := strconv.Atoi(f[1])
				return uid
			}
		}
	}
	return -1
}

// TestArgsOfPeerCommand: installed as /bin/ratelimit (the image, Envoy Gateway's command),
// sluice with no subcommand serves; its subcommands still work under that name. Arguments
// that are not serve's flags are ignored, as envoyproxy/ratelimit ignores every argument
// (issue 30: Envoy AI Gateway's Deployment passes --quotaRateLimitServiceAddr=..., which
// stopped sluice serve with exit 2); elsewhere they are not.
func TestArgsOfPeerCommand(t *testing.T) {
	for _, tc := range []struct{ argv, want, ignored string }{
		{"/bin/ratelimit", "serve", ""},
		{"/bin/ratelimit --log-level debug", "serve --log-level debug", ""},
		{"/bin/ratelimit -log-level=debug --count-denied", "serve -log-level=debug --count-denied", ""},
		{"/bin/ratelimit -h", "serve -h", ""},
		{"/bin/ratelimit check-config /data", "check-config /data", ""},
		{"/bin/ratelimit --quotaRateLimitServiceAddr=envoy-ai-gateway-ratelimit.envoy-gateway-system", "serve", "--quotaRateLimitServiceAddr"},
		{"/bin/ratelimit --nope s3cret --log-level debug extra", "serve --log-level debug", "--nope (a value) (a value)"},
		{"/usr/local/bin/sluice", "", ""},
		{"sluice serve --nope", "serve --nope", ""},
	} {
		got, ignored := argsOf(strings.Fields(tc.argv))
		if strings.Join(got, " ") != tc.want || strings.Join(ignored, " ") != tc.ignored {
			t.Errorf("%s: run(%q) ignoring %q, want %q ignoring %q", tc.argv, got, ignored, tc.want, tc.ignored)
		}
	}
}
