/**
 * The `claude-code` connector, spawned by the real supervisor into the real sandbox, with a
 * stand-in harness in Claude Code's place: a Node program (Claude Code is one) that records its
 * argv and environment, starts the MCP server its `--mcp-config` names the way Claude Code does
 * (a minimal environment plus the server's own `env`), and asks it `initialize` and
 * `tools/list` over stdio. The launch is what Claude Code documents, nothing undeclared leaks
 * into the harness, and `cotal mcp` answers inside the sandbox with the mesh's tools. A missing
 * harness is refused with how to install it.
 */
import assert from "node:assert/strict";
import { isCotalError } from "../../lib/errors.ts";
import type { AgentRow } from "../../lib/manager/managed_agent.ts";
import { denoDir } from "../../lib/manager/start_runner.ts";
import { removeTempDir, waitFor } from "../_harness/broker.ts";
import { jsonFileReady } from "../_harness/files.ts";
import { agentWorkdir } from "./_agent_fixture.ts";
import { startManagerMesh } from "./_manager_mesh.ts";
import { STAND_IN } from "./_stand_in_harness.ts";

Deno.test("manager - claude-code connector: the documented launch, nothing undeclared in its env, and cotal mcp answering inside the sandbox", async () => {
  await using mesh = await startManagerMesh("claudecode");
  const work = await agentWorkdir("cotal-harness-");
  const standIn = `${work}/claude`;
  await Deno.writeTextFile(standIn, STAND_IN, { mode: 0o755 });
  await Deno.chmod(standIn, 0o755);
  const record = `${work}/record.json`;
  // A variable of the supervisor's own that no agent may see.
  Deno.env.set("COTAL_TEST_CANARY", "must-not-leak");
  try {
    await mesh.manager();
    const ctl = await mesh.control();
    const refused = await ctl.request("spawn", { agent: "claude-code", name: "nocc" }, {
      timeoutMs: 30_000,
    }).then(() => undefined, (e) => e);
    assert.ok(isCotalError(refused, "harness_missing"), String(refused));
    assert.match(refused.message, /npm install -g @anthropic-ai\/claude-code/);

    const row = await ctl.request<AgentRow>("spawn", {
      agent: "claude-code",
      name: "cc",
      role: "reviewer",
      command: standIn,
      args: [record],
      workdir: work,
      prompt: "You review pull requests.\nBe brief.",
      model: "claude-sonnet-4-5",
    }, { timeoutMs: 60_000 });
    assert.equal(row.present, true);
    await waitFor(() => jsonFileReady(record), {
      timeoutMs: 60_000,
      what: "the stand-in's record",
    });
    const rec = JSON.parse(await Deno.readTextFile(record));
    assert.equal(rec.error, undefined, rec.error);
    // Claude Code's documented flags, in order, then the operator's own args.
    assert.equal(rec.argv[0], "--mcp-config");
    assert.deepEqual(rec.argv.slice(2), [
      "--strict-mcp-config",
      "--append-system-prompt",
      "You review pull requests.\nBe brief.",
      "--model",
      "claude-sonnet-4-5",
      record,
    ]);
    // The server: this Deno running cotal mcp from the agent's own launch file, as the sandbox
    // sees it.
    assert.equal(rec.server.type, "stdio");
    assert.equal(rec.server.command, Deno.execPath());
    assert.deepEqual(rec.server.args.slice(-3), [
      "mcp",
      "--launch",
      "/run/cotal/launch/launch.json",
    ]);
    assert.deepEqual(rec.server.env, {
      HOME: "/home/agent",
      DENO_DIR: denoDir(),
      DENO_NO_UPDATE_CHECK: "1",
    });
    // It answered inside the sandbox, through the relay, as the agent.
    assert.equal(rec.serverName, "cotal");
    for (const t of ["post", "dm", "task", "reply", "inbox", "wait", "presence"]) {
      assert.ok(rec.tools.includes(t), `tools/list has ${t}: ${rec.tools}`);
    }
    // The harness's environment is the runner's allowlist, nothing of the supervisor's.
    assert.ok(!rec.env.includes("COTAL_TEST_CANARY"), rec.env.join(" "));
    for (const k of rec.env) {
      assert.match(
        k,
        /^(HOME|PATH|USER|LOGNAME|TERM|LANG|LC_[A-Z]+|TZ|COTAL_LAUNCH|COTAL_MCP|DENO_DIR|DENO_NO_UPDATE_CHECK|PWD|SHLVL|_)$/,
        `undeclared variable ${k} in the harness's environment`,
      );
    }
  } finally {
    Deno.env.delete("COTAL_TEST_CANARY");
    await removeTempDir(work);
  }
});

for (const connector of ["gemini", "opencode"] as const) {
  Deno.test(`manager - ${connector} connector: its wrapper runs the harness from outside the workdir, configured where it reads MCP servers, and cotal mcp answers inside the sandbox`, async () => {
    await using mesh = await startManagerMesh(connector);
    const work = await agentWorkdir(`cotal-${connector}-work-`);
    // The harness lives outside the agent's workdir and outside the system dirs: bound in anyway.
    const bin = await agentWorkdir(`cotal-${connector}-bin-`);
    const standIn = `${bin}/${connector}`;
    await Deno.writeTextFile(standIn, STAND_IN, { mode: 0o755 });
    await Deno.chmod(standIn, 0o755);
    const record = `${work}/record.json`;
    try {
      await mesh.manager();
      const ctl = await mesh.control();
      const row = await ctl.request<AgentRow>("spawn", {
        agent: connector,
        name: `${connector}_x`,
        command: standIn,
        args: [record],
        workdir: work,
        prompt: "You help.",
        model: "some-model",
      }, { timeoutMs: 60_000 });
      assert.equal(row.present, true);
      await waitFor(() => jsonFileReady(record), {
        timeoutMs: 60_000,
        what: "the stand-in's record",
      });
      const rec = JSON.parse(await Deno.readTextFile(record));
      assert.equal(rec.error, undefined, rec.error);
      if (connector === "gemini") {
        assert.equal(rec.source, "/home/agent/.gemini/settings.json");
        assert.deepEqual(rec.folderTrust, { enabled: false });
        assert.deepEqual(rec.argv, [
          "--model",
          "some-model",
          "--prompt-interactive",
          "You help.",
          record,
        ]);
      } else {
        assert.equal(rec.source, "OPENCODE_CONFIG_CONTENT");
        assert.deepEqual(rec.argv, ["--model", "some-model", "--prompt", "You help.", record]);
      }
      // The runner filled the placeholders inside the configuration, as the sandbox sees it.
      assert.deepEqual(rec.server.args.slice(-3), [
        "mcp",
        "--launch",
        "/run/cotal/launch/launch.json",
      ]);
      assert.equal(rec.server.env.HOME, "/home/agent");
      for (const t of ["post", "dm", "task", "reply", "inbox", "wait", "presence"]) {
        assert.ok(rec.tools.includes(t), `tools/list has ${t}: ${rec.tools}`);
      }
      for (const k of rec.env) {
        assert.match(
          k,
          /^(HOME|PATH|USER|LOGNAME|TERM|LANG|LC_[A-Z]+|TZ|COTAL_LAUNCH|COTAL_MCP|DENO_DIR|DENO_NO_UPDATE_CHECK|PWD|SHLVL|_|OPENCODE_CONFIG_CONTENT)$/,
          `undeclared variable ${k} in the harness's environment`,
        );
      }
    } finally {
      await removeTempDir(work);
      await removeTempDir(bin);
    }
  });
}
