package workload_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/workload"
)

func TestPresets(t *testing.T) {
	for _, name := range workload.PresetNames() {
		t.Run(name+" - valid", func(t *testing.T) {
			cfg := preset(t, name)
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("unknown preset - ErrConfig naming it", func(t *testing.T) {
		_, err := workload.Preset("extreme")
		if !errors.Is(err, workload.ErrConfig) || !strings.Contains(err.Error(), `"extreme"`) {
			t.Fatalf("Preset(extreme) = %v", err)
		}
	})
	t.Run("contention grows from low to high", func(t *testing.T) {
		low, med, high := preset(t, "low"), preset(t, "medium"), preset(t, "high")
		if low.Load.Contend != 0 || med.Load.Contend <= high.Load.Contend || high.Load.Contend <= 0 {
			t.Fatalf("contend: low %v, medium %v, high %v", low.Load.Contend, med.Load.Contend, high.Load.Contend)
		}
	})
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		field  string
		change func(*workload.Config)
	}{
		{"processes", func(c *workload.Config) { c.Processes = 0 }},
		{"roles", func(c *workload.Config) { c.Roles = -1 }},
		{"members_per_role", func(c *workload.Config) { c.MembersPerRole = 0 }},
		{"members_per_role", func(c *workload.Config) { c.MembersPerRole = c.Processes + 1 }},
		{"readers", func(c *workload.Config) { c.Readers = -1 }},
		{"lease", func(c *workload.Config) { c.Lease = 0 }},
		{"request_timeout", func(c *workload.Config) { c.RequestTimeout = -1 }},
		{"topic_partitions", func(c *workload.Config) { c.TopicPartitions = 0 }},
		{"work_partitions", func(c *workload.Config) { c.WorkPartitions = -2 }},
		{"replication", func(c *workload.Config) { c.Replication = -1 }},
		{"transaction_version", func(c *workload.Config) { c.TransactionVersion = 3 }},
		{"retention", func(c *workload.Config) { c.Retention = -1 }},
		{"work_topic", func(c *workload.Config) { c.Topic, c.WorkTopic = "t", "t" }},
		{"work_topic", func(c *workload.Config) { c.WorkTopic = workload.DefaultTopic }},
		{"load.look", func(c *workload.Config) { c.Load.Look = 0 }},
		{"load.describe_share", func(c *workload.Config) { c.Load.DescribeShare = 1.5 }},
		{"load.contend", func(c *workload.Config) { c.Load.Contend = -1 }},
		{"load.work_rate", func(c *workload.Config) { c.Load.WorkRate = -1 }},
		{"load.work_payload", func(c *workload.Config) { c.Load.WorkPayload = -1 }},
		{"load.work_records", func(c *workload.Config) { c.Load.WorkRecords = workload.RecordCount{Min: -1, Max: 2} }},
		{"load.work_records", func(c *workload.Config) { c.Load.WorkRecords = workload.RecordCount{Min: 4, Max: 2} }},
		{"load.work_records", func(c *workload.Config) {
			c.Load.WorkRecords = workload.RecordCount{Min: 2, Max: workload.MaxWorkRecords + 1}
		}},
		{"load.backoff_min", func(c *workload.Config) { c.Load.BackoffMin = 0 }},
		{"load.backoff_max", func(c *workload.Config) { c.Load.BackoffMax = c.Load.BackoffMin / 2 }},
		{"load.jitter", func(c *workload.Config) { c.Load.Jitter = 1 }},
		{"load.read_every", func(c *workload.Config) { c.Load.ReadEvery = 0 }},
		{"load.read_mix", func(c *workload.Config) { c.Load.ReadMix = workload.Mix{} }},
		{"load.read_mix", func(c *workload.Config) { c.Load.ReadMix.Describe = -1 }},
	} {
		t.Run(tc.field+" - ErrConfig naming the field", func(t *testing.T) {
			cfg := preset(t, workload.PresetMedium)
			tc.change(&cfg)
			err := cfg.Validate()
			if !errors.Is(err, workload.ErrConfig) || !strings.HasPrefix(err.Error(), tc.field+":") {
				t.Fatalf("Validate = %v, want an ErrConfig naming %s", err, tc.field)
			}
		})
	}
	t.Run("no readers - read rates not needed", func(t *testing.T) {
		cfg := preset(t, workload.PresetMedium)
		cfg.Readers, cfg.Load.ReadEvery, cfg.Load.ReadMix = 0, 0, workload.Mix{}
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestConfigJSON(t *testing.T) {
	t.Run("durations read and write as text", func(t *testing.T) {
		cfg := preset(t, workload.PresetHigh)
		b, err := json.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), `"lease":"2s"`) || !strings.Contains(string(b), `"look":"500ms"`) {
			t.Fatalf("durations not as text: %s", b)
		}
		var back workload.Config
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if back != cfg {
			t.Fatalf("round trip changed the config:\n%+v\n%+v", back, cfg)
		}
	})
	t.Run("a preset overlaid with scenario fields", func(t *testing.T) {
		cfg := preset(t, workload.PresetLow)
		if err := json.Unmarshal([]byte(`{"roles":4,"lease":"1.5s","load":{"contend":"3s"}}`), &cfg); err != nil {
			t.Fatal(err)
		}
		if cfg.Roles != 4 || cfg.Lease.D() != 1500*time.Millisecond || cfg.Load.Contend.D() != 3*time.Second || cfg.Load.Look.D() != 2*time.Second {
			t.Fatalf("overlay: %+v", cfg)
		}
	})
	t.Run("work records - left out at one, a number or a range otherwise", func(t *testing.T) {
		cfg := preset(t, workload.PresetLow)
		b, err := json.Marshal(cfg)
		if err != nil || strings.Contains(string(b), "work_records") {
			t.Fatalf("one record: %s (%v), want no work_records", b, err)
		}
		for in, want := range map[string]workload.RecordCount{`3`: {3, 3}, `"3"`: {3, 3}, `"2-6"`: {2, 6}, `" 2 - 6 "`: {2, 6}} {
			var c workload.Config
			if err := json.Unmarshal([]byte(`{"load":{"work_records":`+in+`}}`), &c); err != nil || c.Load.WorkRecords != want {
				t.Fatalf("%s: %+v, %v; want %+v", in, c.Load.WorkRecords, err, want)
			}
			b, err := json.Marshal(c.Load.WorkRecords)
			if err != nil {
				t.Fatal(err)
			}
			var back workload.RecordCount
			if err := json.Unmarshal(b, &back); err != nil || back != want {
				t.Fatalf("%s: written %s, read back %+v (%v)", in, b, back, err)
			}
		}
		for _, in := range []string{`"many"`, `"2-"`, `[2]`, `"2-6-8"`} {
			var c workload.Config
			if err := json.Unmarshal([]byte(`{"load":{"work_records":`+in+`}}`), &c); err == nil {
				t.Errorf("%s: read as %+v, want an error", in, c.Load.WorkRecords)
			}
		}
	})
	t.Run("a bad duration - error", func(t *testing.T) {
		var cfg workload.Config
		if err := json.Unmarshal([]byte(`{"lease":"soon"}`), &cfg); err == nil {
			t.Fatal("no error")
		}
	})
}
