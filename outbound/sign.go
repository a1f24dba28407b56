// Package outbound delivers the outcome to people and systems that are not
// watching (DESIGN rule 18): one engine reads the committed business events
// (the outbox the store fills in each event's own transaction), fans each
// out to its destinations and delivers them, as signed webhooks (Standard
// Webhooks 1.0) and as emails. A delivery never runs inside a run's
// transaction and never holds a run; a failed one is retried, never undoes
// what committed.
package outbound

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"
)

// secretPrefix marks a Standard Webhooks secret: whsec_ then the key in
// base64.
const secretPrefix = "whsec_"

// NewSecret makes a signing secret: 32 random bytes, as whsec_<base64>.
func NewSecret() (string, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return "", err
	}
	return secretPrefix + base64.StdEncoding.EncodeToString(key), nil
}

// Sign returns the webhook-signature header of one delivery: "v1,<sig>" for
// each secret, space-separated (two during a rotation). The signed content
// is "<webhook-id>.<webhook-timestamp>.<body>", the key the secret's base64
// after whsec_.
func Sign(secrets []string, id string, ts time.Time, body []byte) (string, error) {
	sigs := make([]string, 0, len(secrets))
	for _, s := range secrets {
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, secretPrefix))
		if err != nil || len(key) == 0 {
			return "", errors.New("outbound: a webhook secret is not whsec_<base64>")
		}
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(id))
		mac.Write([]byte{'.'})
		mac.Write([]byte(strconv.FormatInt(ts.Unix(), 10)))
		mac.Write([]byte{'.'})
		mac.Write(body)
		sigs = append(sigs, "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	}
	return strings.Join(sigs, " "), nil
}
