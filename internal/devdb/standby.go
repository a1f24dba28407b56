package devdb

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// What a failover needs of a cluster: a streaming standby made from a
// primary, its promotion, and the primary's postmaster to kill. The
// failover test uses them; nothing in refundd itself does.

// CloneStandby makes c, which must not exist yet, a streaming standby of
// primary (which must run): a base backup taken over primary's socket
// with `pg_basebackup -R`, which writes standby.signal and the
// primary_conninfo that streams from primary. Start then starts it as a
// hot standby.
func (c *Cluster) CloneStandby(ctx context.Context, primary *Cluster) error {
	if _, err := os.Stat(filepath.Join(PGBinDir, "pg_basebackup")); err != nil {
		return ErrNoPostgres
	}
	if _, err := os.Stat(filepath.Join(c.Dir, "PG_VERSION")); err == nil {
		return fmt.Errorf("devdb: standby %s: a cluster is there already", c.Dir)
	}
	for _, d := range []string{c.Dir, c.SocketDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("devdb: standby dir: %w", err)
		}
		if err := c.chown(d); err != nil {
			return err
		}
	}
	// -c fast: a checkpoint now rather than a spread one; --no-sync: a
	// throwaway cluster's files need not reach the disk.
	cmd := c.command(ctx, "pg_basebackup", "-D", c.Dir, "-h", primary.SocketDir, "-p", strconv.Itoa(primary.Port),
		"-U", "postgres", "-X", "stream", "-R", "-c", "fast", "--no-sync")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("devdb: pg_basebackup from %s: %w: %s", primary.Dir, err, lastLines(out))
	}
	return nil
}

// Promote ends c's recovery and makes it a primary (`pg_ctl promote`),
// waiting until it takes writes.
func (c *Cluster) Promote(ctx context.Context) error {
	return c.pgctl(ctx, "-D", c.Dir, "-w", "-t", "60", "promote")
}

// PostmasterPID is the pid of c's running postmaster, from its pid file.
func (c *Cluster) PostmasterPID() (int, error) {
	b, err := os.ReadFile(filepath.Join(c.Dir, "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("devdb: no postmaster running in %s: %w", c.Dir, err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		return 0, errors.Join(fmt.Errorf("devdb: postmaster.pid in %s names no pid", c.Dir), err)
	}
	return pid, nil
}

// SocketPath is the unix socket c's server listens on.
func (c *Cluster) SocketPath() string {
	return filepath.Join(c.SocketDir, ".s.PGSQL."+strconv.Itoa(c.Port))
}
