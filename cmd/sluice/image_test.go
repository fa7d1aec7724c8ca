package main

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
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

	// The image is what the peer's is: non-root, entrypoint /bin/ratelimit.
	conf, err := exec.Command(buildah, "inspect", "--type", "image", "--format", "{{.OCIv1.Config.User}} {{.OCIv1.Config.Entrypoint}}", tag).CombinedOutput()
	if err != nil || strings.TrimSpace(string(conf)) != "65532:65532 [/bin/ratelimit]" {
		t.Fatalf("image config %q, %v; want user 65532:65532 and entrypoint /bin/ratelimit", conf, err)
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
// sluice with no subcommand serves; its subcommands still work under that name.
func TestArgsOfPeerCommand(t *testing.T) {
	for _, tc := range []struct{ argv, want string }{
		{"/bin/ratelimit", "serve"},
		{"/bin/ratelimit --log-level debug", "serve --log-level debug"},
		{"/bin/ratelimit check-config /data", "check-config /data"},
		{"/usr/local/bin/sluice", ""},
		{"sluice serve", "serve"},
	} {
		if got := strings.Join(argsOf(strings.Fields(tc.argv)), " "); got != tc.want {
			t.Errorf("%s: run(%q), want %q", tc.argv, got, tc.want)
		}
	}
}
