/**
 * The `gemini` and `opencode` connectors, judged by the harnesses themselves (their npm packages,
 * pinned). Each connector's launch is run as the runner would run it, with the harness's own
 * `mcp list` in place of an interactive session: Gemini CLI through the connector's shell, which
 * writes the settings into a fresh HOME before exec'ing it; OpenCode through env(1) with the
 * connector's inline configuration. Each must list `cotal` and report it connected: it started
 * `cotal mcp` (here with an agent cred instead of a launch file, the judge running outside a
 * sandbox) and spoke MCP to it. Offline: no model, no account.
 */
import assert from "node:assert/strict";
import { isCotalError } from "../../lib/errors.ts";
import type { ManagerLaunchContext } from "../../lib/manager/connectors.ts";
import { cotalMcpServer } from "../../lib/manager/mcp_command.ts";
import {
  GEMINI_SETTINGS_SCRIPT,
  geminiConnector,
  opencodeConnector,
} from "../../lib/manager/harness_connectors.ts";
import { denoDir } from "../../lib/manager/start_runner.ts";
import { removeTempDir, tempDir } from "../_harness/broker.ts";
import { haveJudge, judgeBin, JUDGES } from "../_harness/harness_judges.ts";
import { startDeliverySpace } from "../delivery/_helpers.ts";
import { mcpArgs, provision } from "./_mcp_agent.ts";

const CTX: ManagerLaunchContext = {
  space: "s",
  agent: "helper",
  cwd: "/a",
  materialPath: "/a/launch.json",
  program: "/opt/harness/bin/harness",
  model: "some-model",
  prompt: 'You help.\nQuote "this".',
  args: ["--debug"],
};

const withCtx = (over: Partial<ManagerLaunchContext>): ManagerLaunchContext => ({
  ...CTX,
  ...over,
});

Deno.test("gemini and opencode connectors - the documented launch, cotal mcp as the one server, and a refusal without the harness", async () => {
  const server = cotalMcpServer();
  const g = await geminiConnector.buildLaunch(withCtx({ program: "/opt/g/gemini" }));
  assert.equal(g.command, "/bin/sh");
  assert.deepEqual(g.args.slice(0, 3), ["-c", GEMINI_SETTINGS_SCRIPT, "sh"]);
  assert.deepEqual(JSON.parse(g.args[3]), {
    security: { folderTrust: { enabled: false } },
    mcpServers: { cotal: server },
  });
  assert.deepEqual(g.args.slice(4), [
    "/opt/g/gemini",
    "--model",
    "some-model",
    "--prompt-interactive",
    'You help.\nQuote "this".',
    "--debug",
  ]);
  const o = await opencodeConnector.buildLaunch(withCtx({ program: "/opt/o/opencode" }));
  assert.equal(o.command, "/usr/bin/env");
  assert.match(o.args[0], /^OPENCODE_CONFIG_CONTENT=/);
  assert.deepEqual(JSON.parse(o.args[0].slice("OPENCODE_CONFIG_CONTENT=".length)), {
    mcp: {
      cotal: {
        type: "local",
        command: [server.command, ...server.args],
        environment: server.env,
        enabled: true,
      },
    },
  });
  assert.deepEqual(o.args.slice(1), [
    "/opt/o/opencode",
    "--model",
    "some-model",
    "--prompt",
    'You help.\nQuote "this".',
    "--debug",
  ]);
  const { program: _none, ...without } = CTX;
  for (
    const [c, hint] of [
      [geminiConnector, /npm install -g @google\/gemini-cli/],
      [opencodeConnector, /npm install -g opencode-ai/],
    ] as const
  ) {
    await assert.rejects(
      Promise.resolve().then(() => c.buildLaunch(without)),
      (e) => isCotalError(e, "harness_missing") && hint.test((e as Error).message),
    );
  }
});

/** Runs `launch` with `cotal mcp` pointed at a provisioned agent, the harness's `mcp list` last. */
async function judge(
  name: "gemini" | "opencode",
  rewrite: (args: string[], server: { args: string[]; env: Record<string, string> }) => string[],
): Promise<string> {
  await using s = await startDeliverySpace({ prefix: `${name}judge` });
  const who = await provision(s, "judge");
  const dir = await tempDir(`cotal-${name}judge-`);
  try {
    await Deno.writeTextFile(`${dir}/agent.creds`, who.creds, { mode: 0o600 });
    await Deno.mkdir(`${dir}/home`);
    await Deno.mkdir(`${dir}/work`);
    const connector = name === "gemini" ? geminiConnector : opencodeConnector;
    const { prompt: _p, model: _m, ...plain } = CTX;
    const ctx: ManagerLaunchContext = { ...plain, program: judgeBin(name), args: ["mcp", "list"] };
    const launch = await connector.buildLaunch(ctx);
    // What the runner's placeholders become, outside a sandbox: the cred and this HOME.
    const server = {
      args: mcpArgs(s, who, `${dir}/agent.creds`, `${dir}/inbox`),
      env: { ...cotalMcpServer().env, HOME: `${dir}/home`, DENO_DIR: denoDir() },
    };
    const args = rewrite([...launch.args], server);
    const out = await new Deno.Command(launch.command, {
      args,
      cwd: `${dir}/work`,
      env: { HOME: `${dir}/home`, PATH: "/usr/bin:/bin", NO_COLOR: "1" },
      clearEnv: true,
      stdout: "piped",
      stderr: "piped",
    }).output();
    const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
    if (name === "gemini") {
      // The connector's shell wrote the settings where Gemini CLI reads them.
      const written = JSON.parse(await Deno.readTextFile(`${dir}/home/.gemini/settings.json`));
      assert.deepEqual(written, JSON.parse(args[3]));
    }
    return text;
  } finally {
    await removeTempDir(dir);
  }
}

Deno.test({
  name: haveJudge("gemini")
    ? `gemini connector - Gemini CLI ${JUDGES.gemini.version} reads the settings the connector writes and finds cotal mcp connected`
    : "gemini connector - Gemini CLI judge (skipped: Gemini CLI could not be installed from npm by the test set-up)",
  ignore: !haveJudge("gemini"),
  async fn() {
    const text = await judge("gemini", (args, server) => {
      const settings = JSON.parse(args[3]);
      settings.mcpServers.cotal.args = server.args;
      settings.mcpServers.cotal.env = server.env;
      args[3] = JSON.stringify(settings);
      return args;
    });
    assert.match(text, /cotal: .*\(stdio\) - Connected/, text);
    assert.doesNotMatch(text, /untrusted/);
    // The judge can fail: a server that is no MCP server is not reported connected.
    const bad = await judge("gemini", (args) => {
      const settings = JSON.parse(args[3]);
      settings.mcpServers.cotal = { command: "/bin/false", args: [] };
      args[3] = JSON.stringify(settings);
      return args;
    });
    assert.doesNotMatch(bad, /- Connected/, bad);
  },
});

Deno.test({
  name: haveJudge("opencode")
    ? `opencode connector - OpenCode ${JUDGES.opencode.version} reads the inline configuration and finds cotal mcp connected`
    : "opencode connector - OpenCode judge (skipped: OpenCode could not be installed from npm by the test set-up)",
  ignore: !haveJudge("opencode"),
  async fn() {
    const text = await judge("opencode", (args, server) => {
      const config = JSON.parse(args[0].slice("OPENCODE_CONFIG_CONTENT=".length));
      config.mcp.cotal.command = [config.mcp.cotal.command[0], ...server.args];
      config.mcp.cotal.environment = server.env;
      args[0] = `OPENCODE_CONFIG_CONTENT=${JSON.stringify(config)}`;
      return args;
    });
    assert.match(text, /cotal.*connected/i, text);
    assert.doesNotMatch(text, /cotal.*failed/i, text);
    // The judge can fail: a server that is no MCP server is not reported connected.
    const bad = await judge("opencode", (args) => {
      const config = JSON.parse(args[0].slice("OPENCODE_CONFIG_CONTENT=".length));
      config.mcp.cotal.command = ["/bin/false"];
      args[0] = `OPENCODE_CONFIG_CONTENT=${JSON.stringify(config)}`;
      return args;
    });
    assert.doesNotMatch(bad, /cotal.*connected/i, bad);
  },
});
