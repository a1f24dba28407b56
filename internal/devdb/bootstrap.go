package devdb

// Bootstrap of the private cluster: a command run without DATABASE_URL
// (`refundd dev`, and any other subcommand on a developer's machine) keeps
// its own PostgreSQL under DATA_DIR. This file chooses where that cluster
// lives, starts it, and creates refundd's database in it.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lib/pq" // also the PostgreSQL driver

	"github.com/refundd/refundd/store"
)

// devPort names the private cluster's socket file. The cluster listens on
// no TCP port, so it clashes with nothing. It lives here, not in main,
// because only OpenPrivate needs it: callers get the cluster's URL from the
// store they are handed.
const devPort = 5433

// devDatabase is the database refundd uses in the private cluster.
const devDatabase = "refundd"

// OpenPrivate opens refundd's database in the private cluster under
// dataDir, starting the cluster (and creating the database) if needed. The
// returned close function closes the pool and stops the cluster if this
// call started it; a cluster that was already running is left running. It
// uses its own deadline, so it works after ctx ended.
func OpenPrivate(ctx context.Context, dataDir string, logger *slog.Logger) (*store.Store, func(), error) {
	cluster, stopCluster, err := startPrivateCluster(ctx, dataDir, logger)
	if err != nil {
		return nil, nil, err
	}
	if err := createDatabase(ctx, cluster.URL("postgres"), devDatabase); err != nil {
		stopCluster()
		return nil, nil, err
	}
	st, err := store.Open(ctx, cluster.URL(devDatabase))
	if err != nil {
		stopCluster()
		return nil, nil, err
	}
	return st, func() { st.Close(); stopCluster() }, nil
}

// startPrivateCluster starts the cluster under dataDir unless it is already
// running. The returned stop function stops it only if this call started
// it.
func startPrivateCluster(ctx context.Context, dataDir string, logger *slog.Logger) (*Cluster, func(), error) {
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("devdb: data dir: %w", err)
	}
	home, err := clusterHome(dataDir)
	if err != nil {
		return nil, nil, err
	}
	if home != dataDir {
		logger.Warn("DATA_DIR is inside a folder the postgres user cannot enter; keeping the cluster elsewhere (set DATA_DIR to a reachable folder to choose)",
			"data_dir", dataDir, "cluster_home", home)
	}
	cluster, err := NewCluster(home, devPort)
	if err != nil {
		return nil, nil, err
	}
	t0 := time.Now()
	started, err := cluster.Start(ctx)
	if err != nil {
		return nil, nil, err
	}
	owner := filepath.Join(home, ownerFile)
	switch pid, alive := ownerAlive(owner); {
	case started:
		logger.Info("PostgreSQL started", "dir", cluster.Dir, "took", time.Since(t0).Round(time.Millisecond))
	case alive:
		logger.Info("PostgreSQL already running for another refundd; reusing it and leaving it to that one", "dir", cluster.Dir, "owner_pid", pid)
	default:
		// Its owner was killed (or it was started by hand): nobody would
		// ever stop it. It is ours now, stopped when we stop.
		logger.Warn("PostgreSQL left running by a refundd that is gone; taking it over, and stopping it when done", "dir", cluster.Dir, "owner_pid", pid)
		cluster.Adopt()
		started = true
	}
	if started {
		if err := writeOwner(owner); err != nil {
			stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			return nil, nil, errors.Join(err, cluster.Stop(stopCtx))
		}
	}
	stop := func() {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := cluster.Stop(stopCtx); err != nil {
			logger.Error("stop PostgreSQL", "err", err)
		} else if started {
			os.Remove(owner)
			logger.Info("PostgreSQL stopped", "dir", cluster.Dir)
		}
	}
	return cluster, stop, nil
}

// ownerFile, beside the cluster, names the refundd process that started
// it (its pid and start time), so the next one can tell a cluster in use
// from one whose owner was killed.
const ownerFile = "pg.owner"

// writeOwner records this process as the cluster's owner.
func writeOwner(path string) error {
	pid := os.Getpid()
	if err := os.WriteFile(path, []byte(fmt.Sprintf("%d %s\n", pid, procStart(pid))), 0o644); err != nil {
		return fmt.Errorf("devdb: record the cluster's owner: %w", err)
	}
	return nil
}

// ownerAlive reads the owner file: the owner's pid, and whether that
// process still runs (the same process: same pid and start time).
func ownerAlive(path string) (int, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	var pid int
	var start string
	if n, _ := fmt.Sscan(string(b), &pid, &start); n < 1 || pid <= 0 || pid == os.Getpid() {
		return pid, false
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return pid, false
	}
	return pid, procStart(pid) == start
}

// procStart is when process pid started, in clock ticks since boot
// (/proc/PID/stat, field 22), to tell it from a later process that got
// the same pid; "" where /proc cannot say.
func procStart(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// The command name (field 2) may hold spaces; the fields after its
	// closing parenthesis are plain.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return ""
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 20 {
		return ""
	}
	return fields[19]
}

// clusterHome is the folder the private cluster lives under: dataDir,
// unless we are root and the postgres user (which the server runs as)
// cannot reach it, e.g. a checkout under /root. Then it is a folder under
// /var/tmp named after dataDir, so the same dataDir finds the same cluster
// again.
func clusterHome(dataDir string) (string, error) {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return "", fmt.Errorf("devdb: data dir: %w", err)
	}
	if os.Geteuid() != 0 {
		return dataDir, nil
	}
	pg, err := user.Lookup("postgres")
	if err != nil {
		return dataDir, nil // no postgres user: Start reports what is missing
	}
	for dir := abs; ; dir = filepath.Dir(dir) {
		st, err := os.Stat(dir)
		if err != nil {
			return "", fmt.Errorf("devdb: data dir: %w", err)
		}
		owner := ""
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			owner = strconv.FormatUint(uint64(sys.Uid), 10)
		}
		if st.Mode().Perm()&0o001 == 0 && owner != pg.Uid {
			sum := sha256.Sum256([]byte(abs))
			home := filepath.Join("/var/tmp", "refundd-"+hex.EncodeToString(sum[:6]))
			if err := os.MkdirAll(home, 0o755); err != nil {
				return "", fmt.Errorf("devdb: cluster home: %w", err)
			}
			return home, nil
		}
		if dir == filepath.Dir(dir) {
			return dataDir, nil
		}
	}
}

// createDatabase creates database name unless it exists. It runs against
// the cluster's maintenance database, before refundd's own database exists.
func createDatabase(ctx context.Context, maintenanceURL, name string) error {
	admin, err := sql.Open("postgres", maintenanceURL)
	if err != nil {
		return fmt.Errorf("devdb: open: %w", err)
	}
	defer admin.Close()
	var exists bool
	if err := admin.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return fmt.Errorf("devdb: look up database %s: %w", name, err)
	}
	if exists {
		return nil
	}
	_, err = admin.ExecContext(ctx, `CREATE DATABASE `+pq.QuoteIdentifier(name))
	var pqErr *pq.Error
	if errors.As(err, &pqErr) && pqErr.Code == "42P04" {
		// Another process created it first.
		return nil
	}
	if err != nil {
		return fmt.Errorf("devdb: create database %s: %w", name, err)
	}
	return nil
}
