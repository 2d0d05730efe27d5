package apply

import "fmt"

// The values of Config.CopyFormat (the rule is internal/initcopy/format.go's
// binaryColumn).
const (
	CopyFormatAuto = "auto" // binary where the column types allow, per table ("" too)
	CopyFormatText = "text" // always text
)

func checkCopyFormat(cfg *Config) error {
	switch cfg.CopyFormat {
	case "":
		cfg.CopyFormat = CopyFormatAuto
	case CopyFormatAuto, CopyFormatText:
	default:
		return fmt.Errorf("%w: copy format %q: auto or text", ErrConfig, cfg.CopyFormat)
	}
	return nil
}
