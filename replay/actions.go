package replay

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice/config"
)

// RulesWithActions loads the rules file at path with proxy as its proxy section (YAML, as
// the section's value: {rate_limits: [{actions: [{remote_address: {}}]}]}), in place of the
// file's own, if any: how requests become descriptors when the rules were written for Envoy's
// route rate limits rather than for sluice proxy. The file is loaded as check-config loads
// it, with o; a problem of the proxy section is named as the rules' are.
func RulesWithActions(path, proxy string, o config.Options) (*config.Config, error) {
	doc, err := rulesDoc(path, proxy)
	if err != nil {
		return nil, err
	}
	rules, err := encodeRules(doc)
	if err != nil {
		return nil, err
	}
	return loadRulesText(path, rules, o)
}

// rulesDoc reads the rules file at path as YAML nodes (comments kept), with proxy, when not
// empty, as its proxy section (see RulesWithActions).
func rulesDoc(path, proxy string) (*yaml.Node, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("replay: rules: %w (a rules file, not a directory)", err)
	}
	doc, err := parseRules(src)
	if err != nil || proxy == "" {
		return doc, err
	}
	var section yaml.Node
	if err := yaml.Unmarshal([]byte(proxy), &section); err != nil || len(section.Content) != 1 || section.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("replay: actions: want the proxy section as YAML, e.g. {rate_limits: [{actions: [{remote_address: {}}]}]}")
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("replay: rules: not a mapping (want a domain and descriptors)")
	}
	root := doc.Content[0]
	if v := mapValue(root, "proxy"); v != nil {
		*v = *section.Content[0]
	} else {
		root.Content = append(root.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "proxy"}, section.Content[0])
	}
	return doc, nil
}

// loadRulesText loads rules written as text, as check-config would, from a file named as the
// rules file at path, so that the rules' File and Line name it.
func loadRulesText(path string, rules []byte, o config.Options) (*config.Config, error) {
	dir, err := os.MkdirTemp("", "sluice-replay-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	p := filepath.Join(dir, filepath.Base(path))
	if err := os.WriteFile(p, rules, 0o600); err != nil {
		return nil, err
	}
	c, err := config.LoadWith(p, o)
	if err != nil {
		return nil, fmt.Errorf("replay: rules: %s", strings.ReplaceAll(err.Error(), dir+string(filepath.Separator), ""))
	}
	return c, nil
}
