import assert from "node:assert/strict";
import { isCotalError } from "../../lib/errors.ts";
import { createRuntime } from "../../lib/manager/pty_runtime.ts";
import { chooseIsolation } from "../../lib/manager/sandbox/isolation.ts";
import { runnerLaunchSpec, startRunner } from "../../lib/manager/start_runner.ts";
import type { AgentSpec } from "../../lib/manager/launch.ts";
import { agentFixture, collect, testBwrap, writeMaterial } from "./_agent_fixture.ts";

const LAYOUT = { root: "/R", broker: ["127.0.0.1:4222"], machineHome: "/H/.cotal" };
const PROGRAM: AgentSpec = { kind: "program", command: "/bin/sh", args: ["x.sh"] };

function flag(args: readonly string[], name: string): string | undefined {
  return args.find((a) => a.startsWith(`${name}=`))?.slice(name.length + 1);
}

Deno.test("manager - the runner's argv: bwrap, then deno run with the cotal-agent row", () => {
  const spec = runnerLaunchSpec({
    layout: LAYOUT,
    agentDir: "/R/agents/a1",
    spec: PROGRAM,
    isolation: chooseIsolation({ bwrap: "/usr/bin/bwrap" }),
    env: { PATH: "/usr/bin", HOME: "/home/op" },
    deno: "/usr/bin/deno",
    entry: "/src/cmd/agent.ts",
    config: "/src/deno.json",
  });
  assert.equal(spec.command, "/usr/bin/bwrap");
  assert.equal(spec.cwd, "/R/agents/a1");
  assert.deepEqual(spec.env, {
    PATH: "/usr/bin",
    HOME: "/home/op",
    COTAL_LAUNCH: "/R/agents/a1/launch.json",
  });
  const sep = spec.args.indexOf("--");
  const outer = spec.args.slice(0, sep);
  const inner = spec.args.slice(sep + 1);
  assert.deepEqual(outer.slice(0, 9), [
    "--ro-bind",
    "/",
    "/",
    "--tmpfs",
    "/R",
    "--tmpfs",
    "/tmp",
    "--tmpfs",
    "/H/.cotal",
  ]);
  assert.deepEqual(inner.slice(0, 3), ["/usr/bin/deno", "run", "--no-prompt"]);
  assert.deepEqual(inner.slice(-2), ["--config=/src/deno.json", "/src/cmd/agent.ts"]);
  assert.equal(flag(inner, "--allow-read"), "/R/agents/a1,/R/agents/a1/launch.json");
  assert.equal(flag(inner, "--deny-read"), "/R/secrets/auth,/R/secrets");
  assert.equal(flag(inner, "--allow-write"), "/R/agents/a1");
  assert.equal(flag(inner, "--allow-run"), "/bin/sh");
  assert.equal(flag(inner, "--allow-env"), "PATH,HOME,COTAL_LAUNCH");
  assert.ok(!inner.includes("--allow-ffi") && !inner.includes("-A"));
  // Nothing secret on the command line: only paths and names.
  assert.ok(!spec.args.some((a) => /SU[A-Z2-7]{50,}|BEGIN NATS/.test(a)));
});

Deno.test("manager - under deno-only the runner is deno run itself, same flags, same env", () => {
  const spec = runnerLaunchSpec({
    layout: LAYOUT,
    agentDir: "/R/agents/a1",
    spec: { kind: "module", module: "agent.ts" },
    isolation: chooseIsolation({ mode: "deno-only" }),
    env: {},
    deno: "/usr/bin/deno",
  });
  assert.equal(spec.command, "/usr/bin/deno");
  assert.equal(spec.args[0], "run");
  assert.equal(flag(spec.args, "--allow-run"), undefined);
  assert.deepEqual(spec.env, { COTAL_LAUNCH: "/R/agents/a1/launch.json" });
});

Deno.test("manager - the supervisor's DENO_* and COTAL_* variables never reach the runner", () => {
  Deno.env.set("DENO_COTAL_TEST_TRICK", "1");
  Deno.env.set("COTAL_TEST_SECRET", "s");
  try {
    const spec = runnerLaunchSpec({
      layout: LAYOUT,
      agentDir: "/R/agents/a1",
      spec: PROGRAM,
      isolation: chooseIsolation({ bwrap: "/usr/bin/bwrap" }),
    });
    for (const k of Object.keys(spec.env!)) {
      assert.ok(!k.startsWith("DENO_") && (k === "COTAL_LAUNCH" || !k.startsWith("COTAL_")), k);
    }
  } finally {
    Deno.env.delete("DENO_COTAL_TEST_TRICK");
    Deno.env.delete("COTAL_TEST_SECRET");
  }
});

Deno.test("manager - the runner refuses env outside the allowlist and misplaced paths", () => {
  const base = {
    layout: LAYOUT,
    agentDir: "/R/agents/a1",
    spec: PROGRAM,
    isolation: chooseIsolation({ bwrap: "/usr/bin/bwrap" }),
  };
  assert.throws(
    () => runnerLaunchSpec({ ...base, env: { DENO_DIR: "/tmp/x" } }),
    (e) => isCotalError(e, "runner_env_not_allowed") && e.message.includes("DENO_DIR"),
  );
  assert.throws(
    () => runnerLaunchSpec({ ...base, env: { COTAL_LAUNCH: "/elsewhere" } }),
    (e) => isCotalError(e, "runner_env_not_allowed"),
  );
  assert.throws(
    () => runnerLaunchSpec({ ...base, launchFile: "/R/run/launch.json" }),
    (e) => isCotalError(e, "runner_bad_paths"),
  );
  for (const agentDir of ["/R/secrets/a1", "/R/secrets/auth/a1", "/R/run/a1", "/H/.cotal/a1"]) {
    assert.throws(
      () => runnerLaunchSpec({ ...base, agentDir }),
      (e) => isCotalError(e, "runner_bad_paths"),
      agentDir,
    );
  }
  assert.throws(
    () => runnerLaunchSpec({ ...base, isolation: { mode: "bwrap", summary: "" } }),
    (e) => isCotalError(e, "sandbox_unavailable"),
  );
});

Deno.test("manager - a runner started on the pty runtime inside bwrap gets a terminal", async () => {
  const fx = await agentFixture();
  await Deno.writeTextFile(
    `${fx.agentDir}/agent.ts`,
    `export function run() {
      const size = Deno.consoleSize();
      console.log("isatty:" + Deno.stdin.isTerminal() + " size:" + size.columns + "x" + size.rows);
      return 0;
    }\n`,
  );
  const spec: AgentSpec = { kind: "module", module: "agent.ts" };
  await writeMaterial(fx, spec);
  const r = await startRunner({
    layout: fx.layout,
    agentDir: fx.agentDir,
    spec,
    isolation: chooseIsolation({ bwrap: await testBwrap() }),
    runtime: await createRuntime("pty"),
    cols: 101,
    rows: 29,
  });
  assert.equal(r.runtime, "pty");
  assert.ok(!r.spec.args.includes("--new-session"));
  const { out, code } = await collect(r.handle);
  assert.equal(code, 0, out);
  assert.match(out, /isatty:true size:101x29/);
});

Deno.test("manager - killing a sandboxed runner leaves none of its processes behind", async () => {
  const fx = await agentFixture();
  const spec: AgentSpec = {
    kind: "program",
    command: "/bin/sh",
    args: ["-c", "sleep 600 & echo started:$$; wait"],
  };
  await writeMaterial(fx, spec);
  const r = await startRunner({
    layout: fx.layout,
    agentDir: fx.agentDir,
    spec,
    isolation: chooseIsolation({ bwrap: await testBwrap() }),
    runtime: await createRuntime("process"),
  });
  const dec = new TextDecoder();
  let out = "";
  r.handle.onData((d) => (out += dec.decode(d)));
  const exited = new Promise((res) => r.handle.onExit(res));
  while (!out.includes("started:")) await new Promise((res) => setTimeout(res, 20));
  r.handle.kill("SIGTERM");
  await exited;
  // The agent dir is unique to this test, so any survivor would show it in its cwd.
  const survivors: string[] = [];
  for (const e of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(e.name)) continue;
    try {
      if (Deno.readLinkSync(`/proc/${e.name}/cwd`) === fx.agentDir) survivors.push(e.name);
    } catch {
      // Gone, or not ours.
    }
  }
  assert.deepEqual(survivors, []);
});
