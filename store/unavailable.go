package store

import (
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"

	"github.com/lib/pq"
)

// Unavailable reports whether err says that PostgreSQL could not be reached
// or is shutting down or starting up, rather than that the request was
// wrong: nothing was decided, and the same request may be tried again in a
// few seconds.
func Unavailable(err error) bool {
	var (
		netErr *net.OpError
		pqErr  *pq.Error
	)
	switch {
	case err == nil:
		return false
	case errors.As(err, &netErr), errors.Is(err, driver.ErrBadConn), errors.Is(err, io.ErrUnexpectedEOF):
		return true
	case errors.As(err, &pqErr):
		code := string(pqErr.Code)
		// 08: connection exception; 57P01–57P03: admin or crash shutdown,
		// cannot connect now (starting up); 53300: too many connections.
		return strings.HasPrefix(code, "08") || code == "57P01" || code == "57P02" || code == "57P03" || code == "53300"
	}
	return false
}
