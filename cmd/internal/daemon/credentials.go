package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Credential file names under systemd's $CREDENTIALS_DIRECTORY
// (LoadCredential=mqtt-password:/etc/geist/mqtt-password in the unit).
const (
	credMQTT   = "mqtt-password"
	credHermes = "hermes-password"
)

// readCredentials reads the password files into the passwords. A
// password file not configured defaults to the systemd credential of its
// name when systemd passed one and no password is configured, so the
// unit needs only LoadCredential=. Passwords exposed to other users (a
// configuration file or password file readable by all, a password on the
// command line) are noted in c.warnings.
func (c *Config) readCredentials() error {
	m := &c.MQTT
	if err := readPassword("mqtt", &m.Password, &m.PasswordFile, credMQTT, &c.warnings); err != nil {
		return err
	}
	if h := c.Hermes; h != nil && h.Broker != "" {
		if err := readPassword("hermes", &h.Password, &h.PasswordFile, credHermes, &c.warnings); err != nil {
			return err
		}
	}
	if f := c.HTTP.TokenFile; f != "" && worldReadable(f) {
		c.warnings = append(c.warnings, fmt.Sprintf("the HTTP token file %s is readable by every user of this machine: chmod o-r %[1]s", f))
	}
	if c.filePassword && c.configPath != "" && worldReadable(c.configPath) {
		c.warnings = append(c.warnings, fmt.Sprintf("the configuration file %s holds a password and every user of this machine can read it: chmod o-r %[1]s, or move the password to a password_file (or systemd's LoadCredential=)", c.configPath))
	}
	return nil
}

// readPassword sets *password from *file, or from the credential named
// cred when neither is set and systemd provides it.
func readPassword(what string, password, file *string, cred string, warnings *[]string) error {
	if *file == "" && *password == "" {
		if dir := os.Getenv("CREDENTIALS_DIRECTORY"); dir != "" {
			if p := filepath.Join(dir, cred); fileExists(p) {
				*file = p
			}
		}
	}
	if *file == "" {
		return nil
	}
	b, err := os.ReadFile(*file)
	if err != nil {
		return fmt.Errorf("%s password file: %w", what, err)
	}
	*password = strings.TrimRight(string(b), "\r\n")
	if worldReadable(*file) {
		*warnings = append(*warnings, fmt.Sprintf("the %s password file %s is readable by every user of this machine: chmod o-r %[2]s", what, *file))
	}
	return nil
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

func worldReadable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().Perm()&0o004 != 0
}
