// Package devdb owns refundd's private development PostgreSQL: a cluster
// of its own under a folder (initdb, pg_ctl), refundd's database in it,
// and the demo data `refundd dev` seeds. Tests and the load test use the
// same cluster code.
package devdb

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// PGBinDir is where Debian's PostgreSQL 15 puts its server binaries.
const PGBinDir = "/usr/lib/postgresql/15/bin"

// ErrNoPostgres means the PostgreSQL server binaries are not installed.
var ErrNoPostgres = errors.New("PostgreSQL server binaries not found in " + PGBinDir +
	": install them with `apt-get install -y postgresql`")

// Cluster is a private PostgreSQL cluster in a folder of its own, reachable
// only through a unix socket, so it clashes with no system service or port.
type Cluster struct {
	Dir       string // data directory
	SocketDir string // where the server puts its socket
	Port      int    // only names the socket file
	// Fast trades durability for speed: for throwaway test clusters on tmpfs.
	Fast bool

	started bool // whether Start launched the server (and Stop should end it)
}

// NewCluster describes a cluster kept under dataDir/pg. The socket lives in
// dataDir/run unless that path is too long for a unix socket, in which case a
// short folder under /tmp named after dataDir is used.
func NewCluster(dataDir string, port int) (*Cluster, error) {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return nil, fmt.Errorf("devdb: cluster dir: %w", err)
	}
	sock := filepath.Join(abs, "run")
	// sun_path holds 108 bytes; the file name ".s.PGSQL.NNNNN.lock" needs ~20.
	if len(sock) > 80 {
		sum := sha256.Sum256([]byte(abs))
		sock = filepath.Join(os.TempDir(), "refundd-"+hex.EncodeToString(sum[:6]))
	}
	return &Cluster{Dir: filepath.Join(abs, "pg"), SocketDir: sock, Port: port}, nil
}

// URL is the connection string for database name in this cluster.
func (c *Cluster) URL(database string) string {
	q := url.Values{}
	q.Set("host", c.SocketDir)
	q.Set("port", strconv.Itoa(c.Port))
	q.Set("sslmode", "disable")
	return (&url.URL{Scheme: "postgres", User: url.User("postgres"), Path: "/" + database, RawQuery: q.Encode()}).String()
}

// Start initialises the cluster if its folder is empty and starts the server
// unless it is already running. It reports whether it started the server.
func (c *Cluster) Start(ctx context.Context) (bool, error) {
	if _, err := os.Stat(filepath.Join(PGBinDir, "initdb")); err != nil {
		return false, ErrNoPostgres
	}
	for _, d := range []string{filepath.Dir(c.Dir), c.SocketDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return false, fmt.Errorf("devdb: cluster dir: %w", err)
		}
	}
	if err := c.chown(c.SocketDir); err != nil {
		return false, err
	}
	if _, err := os.Stat(filepath.Join(c.Dir, "PG_VERSION")); err != nil {
		if err := c.initdb(ctx); err != nil {
			return false, err
		}
	}
	if c.running(ctx) {
		return false, nil
	}
	opts := fmt.Sprintf("-c listen_addresses='' -c unix_socket_directories='%s' -p %d", c.SocketDir, c.Port)
	if c.Fast {
		// A test binary runs several tests at once, each with its store's
		// two pools (up to 20 connections) and its own: 100 connections
		// can run out, and a test then reads "too many clients" as 503s.
		opts += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=400"
	}
	// -w waits until the server accepts connections.
	if err := c.pgctl(ctx, "-D", c.Dir, "-l", filepath.Join(c.Dir, "server.log"), "-w", "-t", "60", "-o", opts, "start"); err != nil {
		return false, err
	}
	c.started = true
	return true, nil
}

// Stop shuts the server down if Start launched it. Safe to call twice.
func (c *Cluster) Stop(ctx context.Context) error {
	if !c.started {
		return nil
	}
	c.started = false
	return c.pgctl(ctx, "-D", c.Dir, "-m", "fast", "-w", "stop")
}

// Adopt makes the cluster's running server this Cluster's to stop, as if
// Start had launched it: for one whose owner is gone.
func (c *Cluster) Adopt() { c.started = true }

// Kill stops the cluster's server whoever started it, without waiting for
// clients: for throwaway clusters whose owner is gone.
func (c *Cluster) Kill(ctx context.Context) error {
	if !c.running(ctx) {
		return nil
	}
	return c.pgctl(ctx, "-D", c.Dir, "-m", "immediate", "-w", "stop")
}

func (c *Cluster) running(ctx context.Context) bool {
	cmd := c.command(ctx, "pg_ctl", "-D", c.Dir, "status")
	return cmd.Run() == nil
}

func (c *Cluster) initdb(ctx context.Context) error {
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return fmt.Errorf("devdb: cluster dir: %w", err)
	}
	if err := c.chown(c.Dir); err != nil {
		return err
	}
	cmd := c.command(ctx, "initdb", "--no-sync", "-A", "trust", "-E", "UTF8", "--locale=C.UTF-8", "-U", "postgres", "-D", c.Dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("devdb: initdb %s: %w: %s", c.Dir, err, lastLines(out))
	}
	return nil
}

func (c *Cluster) pgctl(ctx context.Context, args ...string) error {
	cmd := c.command(ctx, "pg_ctl", args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("devdb: pg_ctl %s: %w: %s", args[len(args)-1], err, lastLines(out))
	}
	return nil
}

// command runs a PostgreSQL binary, as the postgres user when we are root:
// the server refuses to run as root.
func (c *Cluster) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(PGBinDir, name), args...)
	// A detached process group: Ctrl-C in the terminal reaches us, and we
	// stop the server in order, instead of it dying mid-write.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if uid, gid, ok := postgresUser(); ok {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uid, Gid: gid}
		cmd.Dir = "/"
	}
	return cmd
}

func (c *Cluster) chown(dir string) error {
	uid, gid, ok := postgresUser()
	if !ok {
		return nil
	}
	if err := os.Chown(dir, int(uid), int(gid)); err != nil {
		return fmt.Errorf("devdb: chown %s: %w", dir, err)
	}
	return nil
}

// postgresUser returns the postgres account's ids when we run as root.
func postgresUser() (uint32, uint32, bool) {
	if os.Geteuid() != 0 {
		return 0, 0, false
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return 0, 0, false
	}
	uid, uerr := strconv.ParseUint(u.Uid, 10, 32)
	gid, gerr := strconv.ParseUint(u.Gid, 10, 32)
	if uerr != nil || gerr != nil {
		return 0, 0, false // not a numeric uid (not Linux): run as ourselves
	}
	return uint32(uid), uint32(gid), true
}

func lastLines(out []byte) string {
	lines := strings.Split(string(bytes.TrimSpace(out)), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return strings.Join(lines, " | ")
}
