package main

// The processes the load test starts and reads: refundd's own
// subcommands and the bare reference server, each a child process whose
// memory and CPU are its own; and what /proc and /metrics say about them.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is a child process that prints "<prefix><url>" once it serves.
type proc struct {
	name    string
	cmd     *exec.Cmd
	url     string
	logPath string

	mu    sync.Mutex
	lines []string // everything it printed on stdout
	done  chan struct{}
	err   error
}

// startProc starts argv with env and waits until it prints a line that
// starts with prefix; the rest of that line is its URL. Its stderr goes to
// logPath, so a failure can be told in its own words.
func startProc(ctx context.Context, name string, argv, env []string, prefix, logPath string) (*proc, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("%s: log file: %w", name, err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.lines = append(p.lines, line)
			p.mu.Unlock()
			if u, ok := strings.CutPrefix(line, prefix); ok && prefix != "" {
				select {
				case urls <- strings.TrimSpace(u):
				default:
				}
			}
		}
		io.Copy(io.Discard, out)
		p.err = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	if prefix == "" {
		return p, nil
	}
	select {
	case p.url = <-urls:
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("%s exited before serving (%v): %s", name, p.err, p.lastLog())
	case <-time.After(90 * time.Second):
		p.stop()
		return nil, fmt.Errorf("%s did not say it was serving within 90 s: %s", name, p.lastLog())
	case <-ctx.Done():
		p.stop()
		return nil, ctx.Err()
	}
}

// line returns the first stdout line that starts with prefix, without it.
func (p *proc) line(prefix string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.lines {
		if rest, ok := strings.CutPrefix(l, prefix); ok {
			return rest
		}
	}
	return ""
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// stop asks the process to end (SIGTERM), and kills it after 20 s.
func (p *proc) stop() {
	if p == nil {
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

// lastLog is the end of the process's stderr, for error messages.
func (p *proc) lastLog() string {
	b, _ := os.ReadFile(p.logPath)
	s := strings.TrimSpace(string(b))
	if len(s) > 1500 {
		s = "…" + s[len(s)-1500:]
	}
	if s == "" {
		return "(nothing on stderr; log " + p.logPath + ")"
	}
	return s
}

// buildRefundd builds refundd from the module that holds the working
// directory, into dir.
func buildRefundd(ctx context.Context, dir string) (string, error) {
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(gomod)) == "" || strings.TrimSpace(string(gomod)) == os.DevNull {
		return "", errors.New("cannot find refundd's source: run from the repository, or pass -bin with a built refundd")
	}
	bin := filepath.Join(dir, "refundd")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build refundd: %v: %s", err, out)
	}
	return bin, nil
}

// environ is os.Environ with the given settings on top.
func environ(set map[string]string) []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := set[k]; !ok {
			out = append(out, kv)
		}
	}
	for k, v := range set {
		out = append(out, k+"="+v)
	}
	return out
}

// scrape reads a Prometheus text page and sums the samples of each metric
// name (labels are added up).
func scrape(ctx context.Context, base string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := getOK(ctx, base+"/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		name, _, _ = strings.Cut(name, "{")
		if i := strings.LastIndex(line, "} "); i >= 0 {
			rest = line[i+2:]
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(f[0], 64); err == nil {
			out[name] += v
		}
	}
	return out, sc.Err()
}

// clockTicks is Linux's USER_HZ, the unit of /proc/PID/stat's CPU times.
const clockTicks = 100

// procStat is what /proc/PID/stat says of one process.
type procStat struct {
	ppid   int
	cpu    float64 // utime + stime, seconds
	reaped float64 // cutime + cstime: its children that ended and were waited for
	rss    float64 // bytes
}

func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	// The command name may hold spaces; the fields start after its ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 22 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	ppid, _ := strconv.Atoi(f[1])
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	cut, _ := strconv.ParseFloat(f[13], 64)
	cst, _ := strconv.ParseFloat(f[14], 64)
	rss, _ := strconv.ParseFloat(f[21], 64)
	return procStat{ppid: ppid, cpu: (ut + st) / clockTicks, reaped: (cut + cst) / clockTicks, rss: rss * float64(os.Getpagesize())}, nil
}

// cpuOf sums the CPU seconds of pids; a process that is gone counts 0.
func cpuOf(pids []int) float64 {
	var sum float64
	for _, pid := range pids {
		if s, err := readProcStat(pid); err == nil {
			sum += s.cpu
		}
	}
	return sum
}

// familyCPU is the CPU seconds of root, its children and the children it
// reaped (PostgreSQL's postmaster and its backends, those that ended
// included: a pool's connection that closed took its backend's CPU with it
// out of the living).
func familyCPU(root int) float64 {
	s, err := readProcStat(root)
	if err != nil {
		return 0
	}
	return cpuOf(familyOf(root)) + s.reaped
}

// familyOf is root and its direct children (PostgreSQL's postmaster and
// its backends).
func familyOf(root int) []int {
	out := []int{root}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if s, err := readProcStat(pid); err == nil && s.ppid == root {
			out = append(out, pid)
		}
	}
	return out
}

// loadAvg is the one-minute load average, for the record of noise.
func loadAvg() float64 {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// getOK GETs url; anything but a 200 is an error, its body closed. The
// caller closes the body of a 200.
func getOK(ctx context.Context, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return resp, nil
}

// fetchTo writes what GET url answers into the file path.
func fetchTo(ctx context.Context, url, path string) error {
	resp, err := getOK(ctx, url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
