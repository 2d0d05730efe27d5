package apply

// SetSplitDefault makes the applier of c split tables above n bytes when
// CopySplitSize is left at its default (0), in place of the default's
// 256 MiB or 1 GiB: the seam through which apply_test copies small tables
// as the default copies big ones (copyWhole), kept out of the public API.
func SetSplitDefault(c *Config, n int64) { c.splitDefault = n }

// SetBalanceMin makes the applier of c balance its copy (BalanceMin) in
// ranges of at least n bytes of work in place of 64 MiB: the seam through
// which apply_test balances small tables.
func SetBalanceMin(c *Config, n int64) { c.balanceMin = n }
