/**
 * Claude Code itself judges `cotal mcp`: the server entry the `claude-code` connector writes
 * (`type`, `command`, `args`, `env`, as in `lib/manager/harness_connectors.ts`, here with an
 * agent cred instead of a launch file since the judge runs outside a sandbox) is added with
 * `claude mcp add-json` and health-checked by `claude mcp get`: Claude Code starts it, speaks MCP
 * to it and reports it connected. Offline: no model, no account.
 */
import assert from "node:assert/strict";
import { cotalMcpServer } from "../../lib/manager/mcp_command.ts";
import { removeTempDir, tempDir } from "../_harness/broker.ts";
import { haveJudge, judgeBin, JUDGES } from "../_harness/harness_judges.ts";
import { startDeliverySpace } from "../delivery/_helpers.ts";
import { denoDir } from "../../lib/manager/start_runner.ts";
import { mcpArgs, provision } from "./_mcp_agent.ts";

Deno.test({
  name: haveJudge("claude-code")
    ? `mcp - Claude Code ${
      JUDGES["claude-code"].version
    } accepts the connector's server entry and finds cotal mcp connected`
    : "mcp - Claude Code judge (skipped: Claude Code could not be installed from npm by the test set-up)",
  ignore: !haveJudge("claude-code"),
  async fn() {
    await using s = await startDeliverySpace({ prefix: "ccjudge" });
    const who = await provision(s, "judge");
    const dir = await tempDir("cotal-ccjudge-");
    try {
      await Deno.writeTextFile(`${dir}/agent.creds`, who.creds, { mode: 0o600 });
      await Deno.mkdir(`${dir}/home`);
      const entry = cotalMcpServer();
      const server = {
        type: "stdio",
        command: entry.command,
        args: mcpArgs(s, who, `${dir}/agent.creds`, `${dir}/inbox`),
        env: { ...entry.env, HOME: `${dir}/home`, DENO_DIR: denoDir() },
      };
      assert.deepEqual(Object.keys(entry.env).sort(), Object.keys(server.env).sort());
      const claude = (args: string[]) =>
        new Deno.Command(judgeBin("claude-code"), {
          args,
          cwd: dir,
          env: { HOME: `${dir}/home`, PATH: "/usr/bin:/bin" },
          clearEnv: true,
          stdout: "piped",
          stderr: "piped",
        }).output();
      const add = await claude(["mcp", "add-json", "cotal", JSON.stringify(server), "-s", "user"]);
      assert.equal(add.code, 0, new TextDecoder().decode(add.stderr));
      const got = await claude(["mcp", "get", "cotal"]);
      const text = new TextDecoder().decode(got.stdout);
      assert.match(text, /Status: ✔ Connected/, text + new TextDecoder().decode(got.stderr));
      assert.match(text, /Type: stdio/);
      // And a server that is no MCP server is not reported connected (the judge can fail).
      const bad = { type: "stdio", command: "/bin/false", args: [] };
      await claude(["mcp", "add-json", "notmcp", JSON.stringify(bad), "-s", "user"]);
      const badText = new TextDecoder().decode((await claude(["mcp", "get", "notmcp"])).stdout);
      assert.doesNotMatch(badText, /✔ Connected/);
    } finally {
      await removeTempDir(dir);
    }
  },
});
