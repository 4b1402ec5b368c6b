package deploy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/linter"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"gopkg.in/yaml.v3"

	"github.com/loaderproject/loader/internal/proctest"
)

var binary string

func TestMain(m *testing.M) { os.Exit(proctest.BuildAndRun(m, "../cmd/loader", "loader", &binary)) }

// invocation is one loader command line of an example, with the environment it sets.
type invocation struct {
	where string
	args  []string
	env   []string
}

var helps = map[string]string{}

func help(t *testing.T, command string) string {
	t.Helper()
	if h, ok := helps[command]; ok {
		return h
	}
	out, err := exec.Command(binary, command, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("loader %s --help: %v\n%s", command, err, out)
	}
	helps[command] = string(out)
	return string(out)
}

var flagRE = regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z0-9-]+)`)

// check confirms every flag and environment variable of inv exists in `loader COMMAND --help`.
func check(t *testing.T, inv invocation) {
	t.Helper()
	if len(inv.args) == 0 {
		t.Fatalf("%s: no loader command line", inv.where)
	}
	h := help(t, inv.args[0])
	flags := map[string]bool{}
	for _, m := range flagRE.FindAllStringSubmatch(h, -1) {
		flags[m[1]] = true
	}
	if len(flags) < 5 {
		t.Fatalf("found only %d flags in loader %s --help", len(flags), inv.args[0])
	}
	for _, a := range inv.args[1:] {
		name, ok := strings.CutPrefix(a, "--")
		if !ok {
			continue
		}
		name, _, _ = strings.Cut(name, "=")
		if !flags[name] {
			t.Errorf("%s: loader %s has no flag --%s", inv.where, inv.args[0], name)
		}
	}
	for _, e := range inv.env {
		if !strings.Contains(h, e) {
			t.Errorf("%s: environment variable %s is not in loader %s --help", inv.where, e, inv.args[0])
		}
	}
}

func flagValue(args []string, name string) string {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
		if a == "--"+name && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

func TestKubernetesIndexedJob(t *testing.T) {
	var job struct {
		Kind string
		Spec struct {
			CompletionMode       string `yaml:"completionMode"`
			Completions          int
			BackoffLimitPerIndex *int   `yaml:"backoffLimitPerIndex"`
			PodReplacementPolicy string `yaml:"podReplacementPolicy"`
			Template             struct {
				Spec struct {
					Containers []struct {
						Args    []string
						Command []string
						Env     []struct {
							Name      string
							Value     string
							ValueFrom *struct {
								SecretKeyRef *struct{ Name, Key string } `yaml:"secretKeyRef"`
							} `yaml:"valueFrom"`
						}
					}
				}
			}
		}
	}
	decode(t, "kubernetes/indexed-job.yaml", func(b []byte) error { return yaml.Unmarshal(b, &job) })
	s := job.Spec
	if job.Kind != "Job" || s.CompletionMode != "Indexed" || s.BackoffLimitPerIndex == nil || s.PodReplacementPolicy != "Failed" {
		t.Errorf("want an Indexed Job with backoffLimitPerIndex and podReplacementPolicy Failed; got %+v", s)
	}
	if len(s.Template.Spec.Containers) != 1 {
		t.Fatalf("want one container, got %d", len(s.Template.Spec.Containers))
	}
	c := s.Template.Spec.Containers[0]
	inv := invocation{where: "indexed-job.yaml", args: append(c.Command, c.Args...)}
	secret := false
	for _, e := range c.Env {
		inv.env = append(inv.env, e.Name)
		if e.Name == "LOADER_SHARD_COUNT" && e.Value != strconv.Itoa(s.Completions) {
			t.Errorf("LOADER_SHARD_COUNT=%s but completions: %d", e.Value, s.Completions)
		}
		secret = secret || e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil
	}
	if !secret {
		t.Error("no credentials from a Secret")
	}
	if !strings.HasPrefix(flagValue(inv.args, "manifest-dir"), "s3://") {
		t.Error("manifests are not in object storage")
	}
	check(t, inv)
}

func TestAWSBatchArrayJob(t *testing.T) {
	var def struct {
		ContainerProperties struct {
			Command     []string
			Environment []struct{ Name, Value string }
			Secrets     []struct{ Name, ValueFrom string }
		} `json:"containerProperties"`
	}
	var submit struct {
		ArrayProperties struct{ Size int } `json:"arrayProperties"`
	}
	decode(t, "aws-batch/job-definition.json", func(b []byte) error { return json.Unmarshal(b, &def) })
	decode(t, "aws-batch/submit-job.json", func(b []byte) error { return json.Unmarshal(b, &submit) })
	cp := def.ContainerProperties
	inv := invocation{where: "job-definition.json", args: cp.Command}
	count := ""
	for _, e := range cp.Environment {
		inv.env = append(inv.env, e.Name)
		if e.Name == "LOADER_SHARD_COUNT" {
			count = e.Value
		}
	}
	for _, e := range cp.Secrets {
		inv.env = append(inv.env, e.Name)
	}
	if count != strconv.Itoa(submit.ArrayProperties.Size) || submit.ArrayProperties.Size < 2 {
		t.Errorf("LOADER_SHARD_COUNT=%q but the array size is %d", count, submit.ArrayProperties.Size)
	}
	check(t, inv)
}

func TestDatabricksForEachTask(t *testing.T) {
	var job struct {
		Tasks []struct {
			ForEachTask *struct {
				Inputs string
				Task   struct {
					SparkPythonTask struct {
						PythonFile string   `json:"python_file"`
						Parameters []string `json:"parameters"`
					} `json:"spark_python_task"`
					NewCluster struct {
						SparkEnvVars map[string]string `json:"spark_env_vars"`
					} `json:"new_cluster"`
				}
			} `json:"for_each_task"`
		}
	}
	decode(t, "databricks/job.json", func(b []byte) error { return json.Unmarshal(b, &job) })
	if len(job.Tasks) != 1 || job.Tasks[0].ForEachTask == nil {
		t.Fatal("want one for_each_task")
	}
	fe := job.Tasks[0].ForEachTask
	var inputs []int
	if err := json.Unmarshal([]byte(fe.Inputs), &inputs); err != nil {
		t.Fatalf("inputs %q: %v", fe.Inputs, err)
	}
	params := fe.Task.SparkPythonTask.Parameters
	if flagValue(params, "shard-index") != "{{input}}" || flagValue(params, "shard-count") != strconv.Itoa(len(inputs)) {
		t.Errorf("want --shard-index {{input}} and --shard-count %d; got %v", len(inputs), params)
	}
	for i, in := range inputs {
		if in != i {
			t.Errorf("inputs %v: want 0..%d", inputs, len(inputs)-1)
			break
		}
	}
	if _, err := os.Stat(filepath.Join("..", fe.Task.SparkPythonTask.PythonFile)); err != nil {
		t.Errorf("python_file: %v", err)
	}
	inv := invocation{where: "databricks/job.json", args: params}
	for name := range fe.Task.NewCluster.SparkEnvVars {
		inv.env = append(inv.env, name)
	}
	check(t, inv)
}

func TestServeCompose(t *testing.T) {
	var compose struct {
		Services map[string]struct {
			Command []string
			Volumes []string
		}
	}
	decode(t, "serve/compose.yaml", func(b []byte) error { return yaml.Unmarshal(b, &compose) })
	sink, ok := compose.Services["sink"]
	if !ok {
		t.Fatal("no sink service")
	}
	wh := flagValue(sink.Command, "warehouse")
	mounted := false
	for _, v := range sink.Volumes {
		mounted = mounted || strings.HasSuffix(v, ":"+wh)
	}
	if wh == "" || !mounted {
		t.Errorf("the warehouse %q is not on a volume (%v)", wh, sink.Volumes)
	}
	check(t, invocation{where: "serve/compose.yaml", args: sink.Command})
}

func TestDockerfile(t *testing.T) {
	f, err := os.Open("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := parser.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range res.Warnings {
		t.Errorf("Dockerfile: %s", w.Short)
	}
	var lint []string
	stages, _, err := instructions.Parse(res.AST, linter.New(&linter.Config{
		Warn: func(rule, _, _, msg string, loc []parser.Range) {
			lint = append(lint, fmt.Sprintf("%s: %s %v", rule, msg, loc))
		},
	}))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lint {
		t.Errorf("Dockerfile check %s", l)
	}
	if len(stages) < 2 {
		t.Fatalf("want a build stage and a runtime stage, got %d", len(stages))
	}
	final := stages[len(stages)-1]
	if !strings.HasPrefix(final.BaseName, "gcr.io/distroless/static") && final.BaseName != "scratch" {
		t.Errorf("runtime base %q; want distroless static or scratch", final.BaseName)
	}
	var user string
	var entry []string
	for _, c := range final.Commands {
		switch c := c.(type) {
		case *instructions.UserCommand:
			user = c.User
		case *instructions.EntrypointCommand:
			if !c.PrependShell {
				entry = c.CmdLine
			}
		}
	}
	if user == "" || strings.HasPrefix(user, "root") || strings.HasPrefix(user, "0") {
		t.Errorf("USER %q; want a non-root user", user)
	}
	if len(entry) != 1 || entry[0] != "/loader" {
		t.Errorf("ENTRYPOINT %v; want [\"/loader\"] in exec form", entry)
	}
	static := false
	for _, c := range stages[0].Commands {
		if r, ok := c.(*instructions.RunCommand); ok && strings.Contains(strings.Join(r.CmdLine, " "), "CGO_ENABLED=0 go build") {
			static = true
		}
	}
	if !static {
		t.Error("the build stage does not build a static binary (CGO_ENABLED=0 go build)")
	}
}

func decode(t *testing.T, path string, fn func([]byte) error) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := fn(b); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
