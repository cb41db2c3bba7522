import assert from "node:assert/strict";
import { isCotalError } from "../../lib/errors.ts";
import { runAgent } from "../../lib/manager/runner.ts";
import { processRuntime } from "../../lib/manager/pty_runtime.ts";
import { startRunner } from "../../lib/manager/start_runner.ts";
import type { AgentSpec } from "../../lib/manager/launch.ts";
import { agentFixture, collect, sandboxedAgent, writeMaterial } from "./_agent_fixture.ts";

const AGENT = `
export function run(ctx) {
  console.log("agent:" + JSON.stringify({
    name: ctx.launch.card.name, dir: ctx.agentDir, cwd: Deno.cwd(), servers: ctx.launch.servers,
  }));
  return 5;
}
`;

const MODES = ["bwrap", "deno-only"] as const;

Deno.test("manager - the runner runs a TypeScript agent module from its launch dir (both isolations)", async () => {
  for (const mode of MODES) {
    const spec: AgentSpec = { kind: "module", module: "agent.ts" };
    await using fx = await sandboxedAgent(spec, { mode, moduleText: AGENT });
    const r = await startRunner({ ...fx.runner, runtime: processRuntime });
    const { out, code } = await collect(r.handle);
    assert.equal(code, 5, `${mode}: ${out}`);
    const seen = JSON.parse(/agent:(.*)/.exec(out)![1]);
    const home = mode === "bwrap" ? "/home/agent" : `${fx.agentDir}/home`;
    assert.deepEqual(seen, {
      name: "a1",
      dir: home,
      cwd: home,
      // Inside its own network namespace the broker is the relay's loopback port.
      servers: ["nats://127.0.0.1:4222"],
    });
  }
});

Deno.test("manager - the runner runs the declared program with args, in its home, minimal env", async () => {
  Deno.env.set("COTAL_TEST_SUPERVISOR_SECRET", "must-not-reach-agents");
  try {
    for (const mode of MODES) {
      const spec: AgentSpec = {
        kind: "program",
        command: "/bin/sh",
        args: ["-c", 'echo "prog:$1:$(pwd)"; env; exit 6', "sh", "first-arg"],
      };
      await using fx = await sandboxedAgent(spec, { mode });
      const r = await startRunner({ ...fx.runner, runtime: processRuntime });
      const { out, code } = await collect(r.handle);
      assert.equal(code, 6, `${mode}: ${out}`);
      const home = mode === "bwrap" ? "/home/agent" : `${fx.agentDir}/home`;
      assert.match(out, new RegExp(`prog:first-arg:${home}$`, "m"));
      const launch = mode === "bwrap" ? "/run/cotal/launch/launch.json" : fx.launchFile;
      assert.match(out, new RegExp(`^COTAL_LAUNCH=${launch}$`, "m"));
      assert.ok(!out.includes("must-not-reach-agents"), mode);
      const names = [...out.matchAll(/^([A-Z_][A-Z0-9_]*)=/gm)].map((m) => m[1]);
      const allowed = ["COTAL_LAUNCH", "HOME", "PATH", "LANG", "TERM", "TZ", "PWD", "SHLVL", "_"];
      // The runner's own addition: its cotal-mcp, first on PATH and named (see program_mcp_test).
      allowed.push("COTAL_MCP");
      assert.match(out, new RegExp(`^COTAL_MCP=${home}/\\.local/bin/cotal-mcp$`, "m"));
      assert.match(out, new RegExp(`^PATH=${home}/\\.local/bin:`, "m"));
      // Where the runner's module cache is (never a secret), and inside bwrap who it is.
      allowed.push("DENO_DIR", "DENO_NO_UPDATE_CHECK");
      if (mode === "bwrap") allowed.push("USER", "LOGNAME");
      for (const n of names) assert.ok(allowed.includes(n), `${mode}: ${n}`);
    }
  } finally {
    Deno.env.delete("COTAL_TEST_SUPERVISOR_SECRET");
  }
});

Deno.test("manager - a runner whose supervisor channel is unreachable refuses to run the agent", async () => {
  const fx = await agentFixture();
  await writeMaterial(fx, { kind: "program", command: "/bin/true", args: [] }, {
    sandbox: { control: `${fx.root}/absent.sock`, home: fx.agentDir },
  });
  await assert.rejects(
    runAgent(fx.launchFile),
    (e) => isCotalError(e, "runner_control_unreachable") && e.message.includes("absent.sock"),
  );
});

Deno.test("manager - the runner refuses a module without run(), outside its dir, or unknown builtin", async () => {
  const fx = await agentFixture();
  await Deno.writeTextFile(`${fx.agentDir}/norun.ts`, "export const x = 1;\n");
  await writeMaterial(fx, { kind: "module", module: "norun.ts" });
  await assert.rejects(
    runAgent(fx.launchFile),
    (e) => isCotalError(e, "agent_bad_module") && /exports no run/.test(e.message),
  );
  await Deno.writeTextFile(`${fx.root}/outside.ts`, AGENT);
  await Deno.symlink(`${fx.root}/outside.ts`, `${fx.agentDir}/linked.ts`);
  await writeMaterial(fx, { kind: "module", module: "linked.ts" });
  await assert.rejects(
    runAgent(fx.launchFile),
    (e) => isCotalError(e, "agent_bad_module") && /resolves outside/.test(e.message),
  );
  await writeMaterial(fx, { kind: "module", module: "absent.ts" });
  await assert.rejects(runAgent(fx.launchFile), (e) => isCotalError(e, "agent_bad_module"));
  await writeMaterial(fx, { kind: "builtin", name: "shell" });
  await assert.rejects(
    runAgent(fx.launchFile),
    (e) => isCotalError(e, "agent_unknown_builtin") && /task-runner/.test(e.message),
  );
});

Deno.test("manager - the built-in task runner validates its config, then connects as the agent", async () => {
  const fx = await agentFixture();
  await writeMaterial(fx, { kind: "builtin", name: "task-runner" });
  await assert.rejects(runAgent(fx.launchFile), (e) => isCotalError(e, "task_no_program"));
  await writeMaterial(fx, {
    kind: "builtin",
    name: "task-runner",
    program: "/usr/bin/make",
    config: { args: ["test"] },
  });
  // It now builds the agent's endpoint: the fixture's creds (a provisioner's) do not speak for
  // the card's principal, which the endpoint refuses before dialing.
  await assert.rejects(
    runAgent(fx.launchFile),
    (e) => isCotalError(e, "principal_mismatch") && /local\.a1/.test(e.message),
  );
});

Deno.test("manager - cotal-agent without COTAL_LAUNCH exits 2 naming the variable", async () => {
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--no-prompt",
      "--allow-env=COTAL_LAUNCH",
      new URL("../../cmd/agent.ts", import.meta.url).pathname,
    ],
    clearEnv: true,
    env: { PATH: "/usr/bin:/bin", HOME: Deno.env.get("HOME") ?? "/root" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(out.code, 2);
  assert.match(new TextDecoder().decode(out.stderr), /COTAL_LAUNCH is not set.*\[launch_no_env\]/);
});
