/**
 * The `codex` connector's launch: the server as one `-c mcp_servers.cotal={...}` override, the
 * model and the initial prompt where the Codex CLI takes them. The Codex CLI itself (its npm
 * package, pinned) judges the override: `codex mcp list --json` must read back exactly the
 * command, arguments and environment of `cotal mcp` the connector meant, quotes and newlines
 * included. Offline: Codex reads its configuration without a model or an account.
 */
import assert from "node:assert/strict";
import { codexConnector, tomlInline } from "../../lib/manager/harness_connectors.ts";
import { cotalMcpServer } from "../../lib/manager/mcp_command.ts";
import { isCotalError } from "../../lib/errors.ts";
import type { ManagerLaunchContext } from "../../lib/manager/connectors.ts";
import { removeTempDir, tempDir } from "../_harness/broker.ts";
import { haveJudge, judgeBin, JUDGES } from "../_harness/harness_judges.ts";

const CTX: ManagerLaunchContext = {
  space: "s",
  agent: "coder",
  cwd: "/a",
  materialPath: "/a/launch.json",
  program: "/usr/local/bin/codex",
  model: "gpt-5-codex",
  prompt: 'You write code.\nQuote "this".',
  args: ["--search"],
};

Deno.test("codex connector - the launch is -c mcp_servers.cotal, --model, the operator's args, then the prompt", async () => {
  const launch = await codexConnector.buildLaunch(CTX);
  assert.equal(launch.command, "/usr/local/bin/codex");
  assert.deepEqual(launch.args, [
    "-c",
    `mcp_servers.cotal=${tomlInline(cotalMcpServer())}`,
    "--model",
    "gpt-5-codex",
    "--search",
    'You write code.\nQuote "this".',
  ]);
  await assert.rejects(
    Promise.resolve().then(() => {
      const { program: _none, ...withoutProgram } = CTX;
      return codexConnector.buildLaunch(withoutProgram);
    }),
    (e) => isCotalError(e, "harness_missing") && /npm install -g @openai\/codex/.test(e.message),
  );
});

Deno.test({
  name: haveJudge("codex")
    ? `codex connector - Codex ${JUDGES.codex.version} reads the override back as the cotal mcp server it means`
    : "codex connector - Codex judge (skipped: the Codex CLI could not be installed from npm by the test set-up)",
  ignore: !haveJudge("codex"),
  async fn() {
    const home = await tempDir("cotal-codexjudge-");
    await Deno.mkdir(`${home}/.codex`);
    try {
      const launch = await codexConnector.buildLaunch(CTX);
      const server = cotalMcpServer();
      // A value with a quote, a backslash and a newline survives the TOML round trip too.
      const tricky = { ...server, env: { ...server.env, NOTE: 'a "b" \\c\nd' } };
      const override = launch.args[1].replace(tomlInline(server), tomlInline(tricky));
      const out = await new Deno.Command(judgeBin("codex"), {
        args: ["mcp", "-c", override, "list", "--json"],
        env: { HOME: home, PATH: "/usr/bin:/bin", CODEX_HOME: `${home}/.codex` },
        clearEnv: true,
        stdout: "piped",
        stderr: "piped",
      }).output();
      assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
      const listed = JSON.parse(new TextDecoder().decode(out.stdout));
      const cotal = listed.find((s: { name: string }) => s.name === "cotal");
      assert.deepEqual(
        {
          type: cotal.transport.type,
          command: cotal.transport.command,
          args: cotal.transport.args,
          env: cotal.transport.env,
        },
        { type: "stdio", command: tricky.command, args: tricky.args, env: tricky.env },
      );
      // The judge can fail: a table that is not a server is refused or not listed as one.
      const bad = await new Deno.Command(judgeBin("codex"), {
        args: ["mcp", "-c", 'mcp_servers.cotal={args = "x"}', "list", "--json"],
        env: { HOME: home, PATH: "/usr/bin:/bin", CODEX_HOME: `${home}/.codex` },
        clearEnv: true,
        stdout: "piped",
        stderr: "piped",
      }).output();
      const badOut = new TextDecoder().decode(bad.stdout);
      assert.ok(bad.code !== 0 || !badOut.includes('"command": "'), badOut);
    } finally {
      await removeTempDir(home);
    }
  },
});
