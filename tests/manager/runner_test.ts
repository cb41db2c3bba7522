import assert from "node:assert/strict";
import { isCotalError } from "../../lib/errors.ts";
import { runAgent } from "../../lib/manager/runner.ts";
import { processRuntime } from "../../lib/manager/pty_runtime.ts";
import { chooseIsolation, type Isolation } from "../../lib/manager/sandbox/isolation.ts";
import { startRunner } from "../../lib/manager/start_runner.ts";
import type { AgentSpec } from "../../lib/manager/launch.ts";
import { agentFixture, collect, testBwrap, writeMaterial } from "./_agent_fixture.ts";

const AGENT = `
export function run(ctx) {
  console.log("agent:" + JSON.stringify({
    name: ctx.launch.card.name, dir: ctx.agentDir, cwd: Deno.cwd(), servers: ctx.launch.servers,
  }));
  return 5;
}
`;

async function isolations(): Promise<[string, Isolation][]> {
  return [
    ["bwrap", chooseIsolation({ bwrap: await testBwrap() })],
    ["deno-only", chooseIsolation({ mode: "deno-only", trusted: true })],
  ];
}

Deno.test("manager - the runner runs a TypeScript agent module from its dir (both isolations)", async () => {
  for (const [name, isolation] of await isolations()) {
    const fx = await agentFixture();
    await Deno.writeTextFile(`${fx.agentDir}/agent.ts`, AGENT);
    const spec: AgentSpec = { kind: "module", module: "agent.ts" };
    await writeMaterial(fx, spec);
    const r = await startRunner({
      layout: fx.layout,
      agentDir: fx.agentDir,
      spec,
      isolation,
      runtime: processRuntime,
    });
    const { out, code } = await collect(r.handle);
    assert.equal(code, 5, `${name}: ${out}`);
    const seen = JSON.parse(/agent:(.*)/.exec(out)![1]);
    assert.deepEqual(seen, {
      name: "a1",
      dir: fx.agentDir,
      cwd: fx.agentDir,
      servers: ["nats://127.0.0.1:4222"],
    });
  }
});

Deno.test("manager - the runner runs the declared program with args, in its dir, minimal env", async () => {
  Deno.env.set("COTAL_TEST_SUPERVISOR_SECRET", "must-not-reach-agents");
  try {
    for (const [name, isolation] of await isolations()) {
      const fx = await agentFixture();
      const spec: AgentSpec = {
        kind: "program",
        command: "/bin/sh",
        args: ["-c", 'echo "prog:$1:$(pwd)"; env; exit 6', "sh", "first-arg"],
      };
      await writeMaterial(fx, spec);
      const r = await startRunner({
        layout: fx.layout,
        agentDir: fx.agentDir,
        spec,
        isolation,
        runtime: processRuntime,
      });
      const { out, code } = await collect(r.handle);
      assert.equal(code, 6, `${name}: ${out}`);
      assert.match(out, new RegExp(`prog:first-arg:${fx.agentDir}`));
      assert.match(out, new RegExp(`^COTAL_LAUNCH=${fx.launchFile}$`, "m"));
      assert.ok(!out.includes("must-not-reach-agents"), name);
      const names = [...out.matchAll(/^([A-Z_][A-Z0-9_]*)=/gm)].map((m) => m[1]);
      for (const n of names) {
        assert.ok(
          ["COTAL_LAUNCH", "HOME", "PATH", "LANG", "TERM", "TZ", "PWD", "SHLVL", "_"].includes(n),
          `${name}: ${n}`,
        );
      }
    }
  } finally {
    Deno.env.delete("COTAL_TEST_SUPERVISOR_SECRET");
  }
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
