/**
 * Red team 28: a message whose `parts` holds a null (or any non-object) element passes the
 * receive check (lib/wire/receive.ts checks only `Array.isArray(msg.parts)`), and every reader
 * that renders parts does `p.kind` on it and throws:
 *  - `cotal mcp` (lib/mcp/tools.ts `partText`): since red team 27's fix the batch is rendered
 *    *before* it is handed out, so the poison stays at the head of the inbox and EVERY later
 *    `inbox`/`wait` fails: the model never sees another DM (permanent, one message).
 *  - the operator's `cotal tail` (lib/mesh/ops.ts) dies on a channel post so made, and the
 *    channel's `history` tool fails for every model in it.
 * Each test passes when the defence holds.
 */
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { connect, credsAuthenticator } from "nats";
import { denoDir } from "../../lib/manager/start_runner.ts";
import { MCP_V8_FLAGS } from "../../lib/manager/mcp_command.ts";
import { rt28Port as freePort } from "./rt28_fixtures/port.ts";

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

Deno.test("redteam28 - a DM whose parts holds null cannot keep a genuine DM from alice's model", async () => {
  const root = "/tmp/cotal-rt28-parts1";
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

    const startMcp = async () => {
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
      client = new Client({ name: "rt28", version: "1" });
      await client.connect(transport);
    };
    await startMcp();
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
      ts: Date.now(),
      space: "default",
      from: { id: "local.mallory", name: "mallory" },
      to: "local.alice",
      parts: [null],
    };
    const ack = await nc.jetstream().publish(
      "cotal.default.inst.local.alice.local.mallory",
      new TextEncoder().encode(JSON.stringify(poison)),
      { msgID: poison.id },
    );
    console.log("mallory's DM stored:", ack.stream, ack.seq);
    await nc.close();
    await new Promise((r) => setTimeout(r, 3_000));

    const later = await cotal(
      ["send", "--root", root, "--to", "local.alice", "genuine: after the poison"],
    );
    assert.equal(later.code, 0, later.stderr);
    await new Promise((r) => setTimeout(r, 2_000));
    const seen: string[] = [];
    for (let i = 0; i < 6; i++) {
      if (i === 3) {
        // alice's model restarts its cotal mcp (same inbox journal): does the poison stay?
        await client?.close().catch(() => {});
        await startMcp();
        console.log("cotal mcp restarted");
      }
      const r = await call("wait", { timeout_seconds: 2 });
      if (r.error) console.log(`wait ${i}: error: ${r.error.slice(0, 160)}`);
      else {
        console.log(`wait ${i}:`, JSON.stringify(r.messages.map((m: { text: string }) => m.text)));
        seen.push(...r.messages.map((m: { text: string }) => m.text));
      }
    }
    assert.ok(
      seen.includes("genuine: from the operator") && seen.includes("genuine: after the poison"),
      "the operator's DMs never reached alice's model",
    );
  } finally {
    await client?.close().catch(() => {});
    await cotal(["down", "--root", root], 120_000);
    await Deno.remove(root, { recursive: true }).catch(() => {});
  }
});

Deno.test("redteam28 - a channel post whose parts holds null cannot stop the operator's tail or the channel's history", async () => {
  const root = "/tmp/cotal-rt28-parts2";
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
    client = new Client({ name: "rt28", version: "1" });
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
        ts: Date.now(),
        space: "default",
        from: { id: "local.mallory", name: "mallory" },
        channel: "general",
        parts: [null],
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

    const w = await call("wait", { timeout_seconds: 2 });
    console.log("alice's wait after the post:", JSON.stringify(w).slice(0, 200));
    const h = await call("history", { channel: "general" });
    console.log("alice's history:", JSON.stringify(h).slice(0, 200));

    assert.match(
      printed,
      /#general local\.operator: after|: after/,
      "the operator's tail stopped before 'after'",
    );
    assert.equal(h.error, undefined, `alice's history failed: ${h.error}`);
    assert.equal(w.error, undefined, `alice's wait failed: ${w.error}`);
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
