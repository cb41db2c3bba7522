/**
 * A stand-in harness built on the MCP SDK's own `Client`: started by the `claude-code`
 * connector inside the agent's sandbox (through a shell wrapper that runs it with this Deno),
 * it starts the MCP server its `--mcp-config` names the way Claude Code does (a default
 * environment plus the server's `env`) over `StdioClientTransport`, plays one side of a
 * conversation, and writes what it saw as JSON to the path in its last argument.
 *
 * `bob` says he is ready in #general (again until alice is heard from); `alice` waits for that, posts
 * to #general, DMs bob and hands the `reviewer` role a task, waiting for the reply; `bob` waits
 * until the post, the DM and the task have reached him and answers the task with `reply`. Each
 * stays up after, as a harness does (one that exits is restarted by its supervisor).
 */
export const SDK_HARNESS = `
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const argv = Deno.args;
const record = argv[argv.length - 1];
const side = argv[argv.length - 2];
const rec = { side, steps: [] };
const save = () => Deno.writeTextFileSync(record, JSON.stringify(rec));
const timeout = setTimeout(() => { rec.error = "timed out"; save(); }, 120_000);
try {
  const srv = JSON.parse(argv[argv.indexOf("--mcp-config") + 1]).mcpServers.cotal;
  const env = { PATH: Deno.env.get("PATH") ?? "", HOME: Deno.env.get("HOME") ?? "", ...srv.env };
  const client = new Client({ name: "sdk-stand-in", version: "1" });
  await client.connect(new StdioClientTransport({ command: srv.command, args: srv.args, env }));
  const call = async (name, args = {}) => {
    const r = await client.callTool({ name, arguments: args }, undefined, { timeout: 90_000 });
    const text = r.content[0]?.text ?? "";
    if (r.isError) throw new Error(name + ": " + text);
    const json = JSON.parse(text);
    rec.steps.push({ name, json });
    return json;
  };
  const until = async (what, test) => {
    for (let i = 0; i < 100; i++) {
      if (await test()) return;
      await new Promise((r) => setTimeout(r, 300));
    }
    throw new Error("never saw " + what);
  };
  rec.joined = (await call("channels", { action: "list" })).joined;
  if (side === "alice") {
    await until("bob ready", async () =>
      (await call("wait", { timeout_seconds: 5 })).messages.some((m) =>
        m.from === "local.bob" && m.text === "bob ready"
      ));
    await call("post", { channel: "general", text: "hello, all" });
    await call("dm", { to: "local.bob", text: "psst, bob" });
    const t = await call("task", { role: "reviewer", text: "review #42", wait_seconds: 60 });
    rec.reply = t.reply?.text ?? null;
  } else {
    const got = [];
    await until("the post, the DM and the task", async () => {
      // Said again until alice answers: a post before she joined reaches no one.
      if (!got.some((m) => m.from === "local.alice")) {
        await call("post", { channel: "general", text: "bob ready" });
      }
      got.push(...(await call("wait", { timeout_seconds: 2 })).messages);
      return ["channel", "dm", "task"].every((k) =>
        got.some((m) => m.kind === k && m.from === "local.alice")
      );
    });
    rec.got = got.filter((m) => m.from !== "local.bob")
      .map((m) => ({ kind: m.kind, from: m.from, text: m.text }));
    const task = got.find((m) => m.kind === "task");
    await call("reply", { message_id: task.id, text: "looks good: " + task.text });
  }
} catch (err) {
  rec.error = String(err?.stack ?? err);
}
clearTimeout(timeout);
save();
setInterval(() => {}, 60_000);
`;
