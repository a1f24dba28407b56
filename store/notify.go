package store

// NOTIFY channels. Notifications only wake listeners; what they act on is
// always read back from the tables, so a lost notification loses nothing.
const (
	// ChannelEvents carries "<run_id>:<seq>" for every committed append.
	ChannelEvents = "refundd_events"
	// ChannelGrants carries the id of a user whose grants or status changed.
	ChannelGrants = "refundd_grants"
)
