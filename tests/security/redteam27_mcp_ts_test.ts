/**
 * Red team 27: one DM with a `ts` that is not a time breaks `cotal mcp`'s inbox for its model,
 * and loses the genuine messages handed out with it.
 *
 * The receive side checks a message's subject against `from.id`, its id and its parts, but not
 * its `ts` (lib/wire/receive.ts; `validateMessage`, which checks `ts`, runs on the sending side
 * only). `cotal mcp` renders every message for the model with `toolMessage`
 * (lib/mcp/tools.ts), whose `at: new Date(m.ts).toISOString()` throws a RangeError for a `ts`
 * that is not a valid time. `takeUnread` hands the batch out (`inbox.handOut(taken)`) *before*
 * rendering it, so the `inbox`/`wait` call fails, and at the client's next request the whole
 * batch is settled as read: the genuine messages that shared the batch are never shown to the
 * model. A member who DMs `ts: "x"` before each of the victim's reads blocks its inbox for good.
 *
 * Here: alice runs `cotal mcp --creds` (a member minted with `--provision`), the operator sends
 * her a genuine DM with `cotal send`, and mallory (another minted member, publishing its own
 * JetStream DM with nats.js) sends one whose `ts` is "x".
 *
 * Second test, the same `ts` on a channel post (mallory is a member of #general): the operator's
 * `cotal tail` prints each post with `new Date(l.ts).toISOString()` (lib/mesh/commands/ops.ts)
 * and dies on it, so the posts after it are not shown; and every model in #general whose
 * `history` tool (or channel resource) covers the post gets "Invalid time value" until 20 newer
 * posts push it out.
 *
 * Observed 2026-12-05 (Deno 2.9.6, root, `cotal up --detach`): alice's `wait` failed with
 * "wait failed: Invalid time value", and the next three `wait`s returned [] — the operator's DM
 * was settled as read without ever being shown. (Any agent can send the same bytes through its
 * relay: the guard does not read a DM's body.)
 *
 * Each test passes when the defence holds.
 */
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { connect, credsAuthenticator } from "nats";
import { denoDir } from "../../lib/manager/start_runner.ts";
import { MCP_V8_FLAGS } from "../../lib/manager/mcp_command.ts";
import { freePort } from "../_harness/broker.ts";

const CHECKOUT = new URL("../..", import.meta.url).pathname.replace(/\/$/, "");
const COTAL = `${CHECKOUT}/cmd/cotal.ts`;
const CONFIG = `${CHECKOUT}/deno.json`;

async function publishAs(
  root: string,
  url: string,
  actor: string,
  inboxPrefix: string,
  subject: string,
  body: Record<string, unknown>,
): Promise<void> {
  const nc = await connect({
    servers: url,
    authenticator: credsAuthenticator(
      new TextEncoder().encode(await Deno.readTextFile(`${root}/${actor}.creds`)),
    ),
    inboxPrefix,
  });
  try {
    const ack = await nc.jetstream().publish(
      subject,
      new TextEncoder().encode(JSON.stringify(body)),
      { msgID: body.id as string },
    );
    console.log(`${actor}'s message stored:`, ack.stream, ack.seq);
  } finally {
    await nc.close();
  }
}

async function cotal(args: string[], timeoutMs = 120_000) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", COTAL, ...args],
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(timeoutMs),
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

Deno.test("redteam27 - a DM whose ts is not a time cannot keep a genuine DM from alice's model", async () => {
  const root = "/tmp/cotal-rt27-mcp";
  await Deno.remove(root, { recursive: true }).catch(() => {});
  const port = freePort();
  const url = `nats://127.0.0.1:${port}`;
  const up = await cotal(["up", "--root", root, "--port", String(port), "--detach"], 170_000);
  assert.equal(up.code, 0, up.stderr);
  let client: Client | undefined;
  try {
    const mint = async (actor: string) => {
      const r = await cotal([
        ...["mint", "--root", root, "--profile", "agent", "--provision"],
        ...["--actor", actor, "--out", `${root}/${actor}.creds`, "--json"],
      ]);
      assert.equal(r.code, 0, r.stderr);
      return JSON.parse(r.stdout) as { lifecycleUid: string; inboxPrefix: string };
    };
    const alice = await mint("alice");
    const mallory = await mint("mallory");

    const transport = new StdioClientTransport({
      command: Deno.execPath(),
      args: [
        ...["run", "-A", `--v8-flags=${MCP_V8_FLAGS.join(",")}`, `--config=${CONFIG}`, COTAL],
        ...["mcp", "--creds", `${root}/alice.creds`, "--space", "default"],
        ...["--lifecycle-uid", alice.lifecycleUid, "--server", url, "--inbox", `${root}/inbox`],
      ],
      env: { PATH: "/usr/bin:/bin", HOME: `${root}`, DENO_DIR: denoDir() },
      stderr: "pipe",
    });
    client = new Client({ name: "rt27", version: "1" });
    await client.connect(transport);
    const call = async (name: string, args: Record<string, unknown> = {}) => {
      const r = await client!.callTool({ name, arguments: args }, undefined, { timeout: 60_000 });
      const text = (r.content as { text: string }[])[0]?.text ?? "";
      return r.isError ? { error: text } : JSON.parse(text);
    };
    // alice's model has read what was there.
    await call("inbox");

    const sent = await cotal([
      "send",
      "--root",
      root,
      "--to",
      "local.alice",
      "genuine: from the operator",
    ]);
    assert.equal(sent.code, 0, sent.stderr);

    const nc = await connect({
      servers: url,
      authenticator: credsAuthenticator(
        new TextEncoder().encode(await Deno.readTextFile(`${root}/mallory.creds`)),
      ),
      inboxPrefix: mallory.inboxPrefix,
    });
    const poison = {
      id: crypto.randomUUID(),
      ts: "x",
      space: "default",
      from: { id: "local.mallory", name: "mallory" },
      to: "local.alice",
      parts: [{ kind: "text", text: "poison" }],
    };
    const ack = await nc.jetstream().publish(
      "cotal.default.inst.local.alice.local.mallory",
      new TextEncoder().encode(JSON.stringify(poison)),
      { msgID: poison.id },
    );
    console.log("mallory's DM stored:", ack.stream, ack.seq);
    await nc.close();
    await new Promise((r) => setTimeout(r, 3_000));

    const seen: string[] = [];
    for (let i = 0; i < 4; i++) {
      const r = await call("wait", { timeout_seconds: 2 });
      if (r.error) console.log(`wait ${i}: error: ${r.error.slice(0, 160)}`);
      else {
        console.log(`wait ${i}:`, JSON.stringify(r.messages.map((m: { text: string }) => m.text)));
        seen.push(...r.messages.map((m: { text: string }) => m.text));
      }
    }
    assert.ok(
      seen.includes("genuine: from the operator"),
      "the operator's DM never reached alice's model",
    );
  } finally {
    await client?.close().catch(() => {});
    await cotal(["down", "--root", root], 120_000);
    await Deno.remove(root, { recursive: true }).catch(() => {});
  }
});

Deno.test("redteam27 - a channel post whose ts is not a time cannot stop the operator's tail or the channel's history", async () => {
  const root = "/tmp/cotal-rt27-mcp2";
  await Deno.remove(root, { recursive: true }).catch(() => {});
  const port = freePort();
  const url = `nats://127.0.0.1:${port}`;
  const up = await cotal(["up", "--root", root, "--port", String(port), "--detach"], 170_000);
  assert.equal(up.code, 0, up.stderr);
  let client: Client | undefined;
  let tail: Deno.ChildProcess | undefined;
  try {
    const mint = async (actor: string) => {
      const r = await cotal([
        ...["mint", "--root", root, "--profile", "agent", "--provision", "--channel", "general"],
        ...["--actor", actor, "--out", `${root}/${actor}.creds`, "--json"],
      ]);
      assert.equal(r.code, 0, r.stderr);
      return JSON.parse(r.stdout) as { lifecycleUid: string; inboxPrefix: string };
    };
    const alice = await mint("alice");
    const mallory = await mint("mallory");
    const transport = new StdioClientTransport({
      command: Deno.execPath(),
      args: [
        ...["run", "-A", `--v8-flags=${MCP_V8_FLAGS.join(",")}`, `--config=${CONFIG}`, COTAL],
        ...["mcp", "--creds", `${root}/alice.creds`, "--space", "default", "--channel", "general"],
        ...["--lifecycle-uid", alice.lifecycleUid, "--server", url, "--inbox", `${root}/inbox`],
      ],
      env: { PATH: "/usr/bin:/bin", HOME: `${root}`, DENO_DIR: denoDir() },
      stderr: "pipe",
    });
    client = new Client({ name: "rt27", version: "1" });
    await client.connect(transport);
    const call = async (name: string, args: Record<string, unknown> = {}) => {
      const r = await client!.callTool({ name, arguments: args }, undefined, { timeout: 60_000 });
      const text = (r.content as { text: string }[])[0]?.text ?? "";
      return r.isError ? { error: text } : JSON.parse(text);
    };

    // The operator tails the space.
    tail = new Deno.Command(Deno.execPath(), {
      // Two lines: "before" and "after" (the poison is not a line; if it were, the count of two
      // ends the tail before "after" and the assertion below says so).
      args: ["run", "-A", COTAL, "tail", "--root", root, "--count", "2"],
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    await new Promise((r) => setTimeout(r, 4_000));

    const post = (text: string) =>
      cotal(["send", "--root", root, "--channel", "general", text]).then((r) =>
        assert.equal(r.code, 0, r.stderr)
      );
    await post("before");
    await publishAs(
      root,
      url,
      "mallory",
      mallory.inboxPrefix,
      "cotal.default.chat.local.mallory.general",
      {
        id: crypto.randomUUID(),
        ts: "x",
        space: "default",
        from: { id: "local.mallory", name: "mallory" },
        channel: "general",
        parts: [{ kind: "text", text: "poison" }],
      },
    );
    await post("after");
    await new Promise((r) => setTimeout(r, 3_000));

    const collecting = tail.output();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const out = await Promise.race([
      collecting,
      new Promise<undefined>((r) => timer = setTimeout(() => r(undefined), 10_000)),
    ]);
    clearTimeout(timer);
    if (out === undefined) {
      tail.kill("SIGTERM");
      await collecting;
    }
    tail = undefined;
    const dec = new TextDecoder();
    const printed = out ? dec.decode(out.stdout) : "";
    console.log("tail printed:", JSON.stringify(printed));
    if (out) {
      console.log("tail stderr:", dec.decode(out.stderr).trim().split("\n").slice(-2).join(" | "));
    }

    const h = await call("history", { channel: "general" });
    console.log("alice's history:", JSON.stringify(h).slice(0, 200));

    assert.match(
      printed,
      /#general local\.operator: after|: after/,
      "the operator's tail stopped before 'after'",
    );
    assert.equal(h.error, undefined, `alice's history failed: ${h.error}`);
  } finally {
    if (tail) {
      try {
        tail.kill("SIGTERM");
      } catch {
        // Already ended.
      }
      await tail.status;
    }
    await client?.close().catch(() => {});
    await cotal(["down", "--root", root], 120_000);
    await Deno.remove(root, { recursive: true }).catch(() => {});
  }
});
