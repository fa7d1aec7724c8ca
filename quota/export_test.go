package quota

// Answered reports whether every report sent on the current stream has been answered.
func Answered(c *Client) bool { return c.answers.Load() >= c.reports.Load() }
