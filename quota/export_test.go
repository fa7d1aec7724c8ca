package quota

// Answered reports whether every report sent on the current stream has been answered.
func Answered(c *Client) bool { return c.answers.Load() >= c.reports.Load() }

// Counts returns the reports sent and the messages received (answers and pushes alike: the
// protocol does not tell them apart) on the client's streams.
func Counts(c *Client) (reports, received uint64) { return c.reports.Load(), c.answers.Load() }
