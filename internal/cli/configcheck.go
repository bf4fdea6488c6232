package cli

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cast"
	"github.com/spf13/viper"

	"github.com/kbplatform/kbplatform/sdk"
)

// Settings are checked strictly: viper would ignore a misspelt key and read `seeds: five` as 0,
// and the run would then go on with defaults the user did not choose.

// modelSections are the top-level keys with a decoder of their own (models.go).
var modelSections = map[string]bool{"models": true, "prices": true, "model_retry": true}

// checkConfigFile refuses keys the configuration does not have (naming the nearest one) and values
// of the wrong type (naming the key).
func checkConfigFile(file string, defaults map[string]any) error {
	// Only what the file says, not the defaults or the environment.
	fv := viper.New()
	fv.SetConfigFile(file)
	if e := ext(file); e != "json" && e != "toml" {
		fv.SetConfigType("yaml")
	}
	if err := fv.ReadInConfig(); err != nil {
		return fmt.Errorf("config file %s: %w", file, err)
	}
	known := make([]string, 0, len(defaults))
	sections := map[string]bool{}
	for k := range defaults {
		known = append(known, k)
		if i := strings.IndexByte(k, '.'); i > 0 {
			sections[k[:i]] = true
		}
	}
	sort.Strings(known)
	var check func(prefix string, m map[string]any) error
	check = func(prefix string, m map[string]any) error {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			key := prefix + k
			val := m[k]
			if prefix == "" && modelSections[k] {
				continue // decoded, as strictly, by loadModelSettings (models.go)
			}
			if sub, ok := val.(map[string]any); ok && prefix == "" && sections[k] {
				if err := check(key+".", sub); err != nil {
					return err
				}
				continue
			}
			def, ok := defaults[key]
			if !ok {
				msg := fmt.Sprintf("config file %s: unknown key %q", file, key)
				if n := sdk.Nearest(key, known); n != "" {
					msg += fmt.Sprintf(" (did you mean %q?)", n)
				}
				return fmt.Errorf("%s; `kbplatform config` lists every setting", msg)
			}
			if err := typeCheck(def, val); err != nil {
				return fmt.Errorf("config file %s: key %q: %w", file, key, err)
			}
		}
		return nil
	}
	return check("", fv.AllSettings())
}

func ext(file string) string {
	if i := strings.LastIndexByte(file, '.'); i >= 0 {
		return file[i+1:]
	}
	return ""
}

// checkEnv refuses a KBP_ variable whose value does not fit its setting's type.
func checkEnv(defaults map[string]any) error {
	for key, def := range defaults {
		name := "KBP_" + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(key))
		val, ok := os.LookupEnv(name)
		if !ok || val == "" {
			continue
		}
		if err := typeCheck(def, val); err != nil {
			return fmt.Errorf("environment variable %s (%s): %w", name, key, err)
		}
	}
	return nil
}

// typeCheck says whether val can be read as the type of the setting's default.
func typeCheck(def, val any) error {
	var err error
	want := ""
	switch def.(type) {
	case int, int64:
		_, err = cast.ToInt64E(val)
		want = "a whole number"
		if f, ok := val.(float64); ok && f != float64(int64(f)) {
			err = fmt.Errorf("fraction")
		}
	case float64:
		_, err = cast.ToFloat64E(val)
		want = "a number"
	case bool:
		_, err = cast.ToBoolE(val)
		want = "true or false"
	case time.Duration:
		_, err = cast.ToDurationE(val)
		want = "a duration such as 90s or 15m"
	case []string:
		_, err = cast.ToStringSliceE(val)
		want = "a list of strings"
	case string:
		switch val.(type) {
		case map[string]any, []any:
			err = fmt.Errorf("not a scalar")
		}
		want = "a single value"
	}
	if err != nil {
		return fmt.Errorf("%v is not %s", quote(val), want)
	}
	return nil
}

func quote(v any) string {
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprint(v)
}
