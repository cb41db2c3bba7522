/**
 * Fault pass 11: the full stack (`cotal up --detach`), a task runner whose command takes a few
 * seconds, a task sent to its role over `cotal mcp` (acknowledged with an id), and a kill -9 of
 * the agent's runner while the command runs. The supervisor restarts the runner at once. Found:
 * the task is never run again and its sender never hears anything (no result, no error), though
 * the send was acknowledged: the runner acks a task when it takes it
 * (lib/manager/agents/task_runner.ts: "a runner that dies mid-command does not run it again"),
 * and nothing tells the sender the command was cut. Seen twice on the stack by hand (kill at 2 s
 * into a 5 s command; 100 s later: one start, no finish, no reply).
 */
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { tempDir, waitFor } from "../_harness/broker.ts";
import { cotalIn, cotalQuietly } from "../_harness/cotal_cli.ts";
import { processesMentioning } from "../manager/_manager_mesh.ts";
import { CONFIG, COTAL } from "../mcp/_mcp_agent.ts";
import { rangePort } from "./_fp11.ts";
import { denoDir } from "../../lib/manager/start_runner.ts";

Deno.test({
  name:
    "fault pass 11 - a task whose runner is killed mid-command is run again or answered, never silently dropped (skipped: known gap, not fixed; the built-in task runner takes a task at most once, as its command is not assumed idempotent, and a runner restarted in a fresh sandbox does not know what its predecessor took, so the sender is not told)",
  ignore: true,
}, async () => {
  const base = await tempDir("cotal-fp11-tr-");
  const root = `${base}/.cotal`;
  const home = `${base}/home`;
  await Deno.mkdir(home, { recursive: true });
  const cotal = cotalIn(root);
  const port = rangePort();
  const wd = `${base}/wd`;
  await Deno.mkdir(wd, { recursive: true, mode: 0o777 });
  await Deno.chmod(wd, 0o777);
  let client: Client | undefined;
  try {
    await cotal("up", "--detach", "--port", String(port));
    await cotal(
      "spawn",
      "--role",
      "slow",
      "--name",
      "slow1",
      "--workdir",
      wd,
      "--",
      "/bin/sh",
      "-c",
      `read -r l; echo "start $l" >> ${wd}/got.txt; sleep 6; echo "done $l" >> ${wd}/got.txt; echo "ok $l"`,
    );
    const minted = await cotal(
      "mint",
      "--profile",
      "agent",
      "--provision",
      "--actor",
      "asker",
      "--out",
      `${base}/asker.creds`,
    );
    const uid = /lifecycle uid ([a-z0-9]+)/.exec(minted.stdout + minted.stderr)![1];
    const transport = new StdioClientTransport({
      command: Deno.execPath(),
      args: [
        "run",
        "-A",
        `--config=${CONFIG}`,
        COTAL,
        "mcp",
        ...["--creds", `${base}/asker.creds`, "--space", "default", "--lifecycle-uid", uid],
        ...["--server", `nats://127.0.0.1:${port}`, "--inbox", `${base}/inbox`],
      ],
      env: { PATH: "/usr/bin:/bin", HOME: home, DENO_DIR: denoDir() },
      stderr: "pipe",
    });
    client = new Client({ name: "fp11", version: "1" });
    await client.connect(transport);
    const call = async (name: string, args: Record<string, unknown>) => {
      const r = await client!.callTool({ name, arguments: args }, undefined, { timeout: 60_000 });
      const text = (r.content as { text: string }[])[0]?.text ?? "";
      return { isError: r.isError === true, text, json: JSON.parse(text) };
    };
    const sent = await call("task", { role: "slow", text: "job-1" });
    assert.equal(sent.isError, false, sent.text);
    const got = () => Deno.readTextFile(`${wd}/got.txt`).catch(() => "");
    await waitFor(async () => (await got()).includes("start job-1"), {
      timeoutMs: 30_000,
      what: "the task runner started the command",
    });
    // kill -9 of the agent's runner (the deno process running cmd/agent.ts for this workdir).
    const runner = processesMentioning(wd).find((p) => {
      const cmd = Deno.readTextFileSync(`/proc/${p}/cmdline`);
      return cmd.includes("cmd/agent.ts") && cmd.startsWith(Deno.execPath());
    });
    assert.ok(runner, "the agent's runner is running");
    Deno.kill(runner, "SIGKILL");
    // 100 s: past the task queue's 60 s ack wait, with the runner restarted at once.
    let reply: unknown = undefined;
    const deadline = Date.now() + 100_000;
    while (Date.now() < deadline && reply === undefined) {
      const r = await call("wait", { timeout_seconds: 10 });
      reply = r.json.messages.find((m: { replyTo?: string }) => m.replyTo === sent.json.id);
    }
    const ran = await got();
    assert.ok(
      reply !== undefined || ran.includes("done job-1"),
      `task ${sent.json.id} was acknowledged; 100 s after its runner was killed mid-command ` +
        `its sender has no reply and the command log says ${JSON.stringify(ran)}`,
    );
  } finally {
    await client?.close().catch(() => {});
    await cotalQuietly(root, "down");
  }
});
