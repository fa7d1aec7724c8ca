package adaptive

import (
	"errors"
	"fmt"
)

// ErrInvalidSettings reports Settings that cannot be used. Every such error is a
// *SettingsError wrapping it.
var ErrInvalidSettings = errors.New("adaptive: invalid settings")

// SettingsError names the field of Settings at fault and why.
type SettingsError struct {
	// Field is the field's snake_case name, as in YAML (floor, ceiling, ...).
	Field string
	// Reason says what is wrong, including the offending value.
	Reason string
}

// Error returns "adaptive: invalid settings: <field>: <reason>".
func (e *SettingsError) Error() string {
	return ErrInvalidSettings.Error() + ": " + e.Field + ": " + e.Reason
}

// Unwrap returns ErrInvalidSettings.
func (e *SettingsError) Unwrap() error { return ErrInvalidSettings }

func settingsError(field, format string, args ...any) error {
	return &SettingsError{Field: field, Reason: fmt.Sprintf(format, args...)}
}
