/**
 * Red team 28: message ids are the only dedupe key, across senders and kinds. `cotal mcp`'s
 * inbox journal (lib/mcp/journal.ts `append`: `if (this.#seen.has(message.id)) return false`)
 * keeps the first message with an id and drops any later one with the same id, whoever sent it.
 * A channel post's id is seen by every member of the channel the moment it is posted. While
 * alice's model is not running (its `cotal mcp` is started per session), mallory — a member of
 * #general — copies the id of the operator's post into a DM to alice. If the DM reaches alice's
 * journal first, the operator's post is dropped as a duplicate and her model never sees it.
 * Passes when the defence holds: alice's model sees the operator's post.
 *
 * Red team 29 took it one step further: `reply` found the message by id alone, the first one
 * kept, so alice's answer to the post could go to mallory as a DM. Two senders of one id are
 * now refused until the model names the sender.
 */
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { connect, credsAuthenticator } from "nats";
import { denoDir } from "../../lib/manager/start_runner.ts";
import { MCP_V8_FLAGS } from "../../lib/manager/mcp_command.ts";
import { rt28Port } from "./rt28_fixtures/port.ts";
import { cotal } from "./rt28_fixtures/cotal.ts";

const CHECKOUT = new URL("../..", import.meta.url).pathname.replace(/\/$/, "");
const COTAL = `${CHECKOUT}/cmd/cotal.ts`;
const CONFIG = `${CHECKOUT}/deno.json`;

async function collide(online: boolean) {
  const root = `/tmp/cotal-rt28-idcoll-${online}`;
  await Deno.remove(root, { recursive: true }).catch(() => {});
  const port = rt28Port();
  const url = `nats://127.0.0.1:${port}`;
  const up = await cotal(["up", "--root", root, "--port", String(port), "--detach"], 170_000);
  assert.equal(up.code, 0, up.stderr);
  let client: Client | undefined;
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
    const startMcp = async () => {
      const transport = new StdioClientTransport({
        command: Deno.execPath(),
        args: [
          ...["run", "-A", `--v8-flags=${MCP_V8_FLAGS.join(",")}`, `--config=${CONFIG}`, COTAL],
          ...[
            "mcp",
            "--creds",
            `${root}/alice.creds`,
            "--space",
            "default",
            "--channel",
            "general",
          ],
          ...["--lifecycle-uid", alice.lifecycleUid, "--server", url, "--inbox", `${root}/inbox`],
        ],
        env: { PATH: "/usr/bin:/bin", HOME: `${root}`, DENO_DIR: denoDir() },
        stderr: "pipe",
      });
      client = new Client({ name: "rt28", version: "1" });
      await client.connect(transport);
    };
    const call = async (name: string, args: Record<string, unknown> = {}) => {
      const r = await client!.callTool({ name, arguments: args }, undefined, { timeout: 60_000 });
      const text = (r.content as { text: string }[])[0]?.text ?? "";
      return r.isError ? { error: text } : JSON.parse(text);
    };
    await startMcp();
    await call("inbox");
    if (!online) {
      await client!.close();
      client = undefined;
    }

    const nc = await connect({
      servers: url,
      authenticator: credsAuthenticator(
        new TextEncoder().encode(await Deno.readTextFile(`${root}/mallory.creds`)),
      ),
      inboxPrefix: mallory.inboxPrefix,
    });
    const sub = nc.subscribe("cotal.default.chat.*.*.general", { max: 1 });
    await nc.flush();
    const sent = await cotal(["send", "--root", root, "--channel", "general", "genuine post"]);
    assert.equal(sent.code, 0, sent.stderr);
    let postId = "";
    for await (const m of sub) postId = JSON.parse(new TextDecoder().decode(m.data)).id;
    console.log("mallory saw the post's id:", postId);
    const decoy = {
      id: postId,
      ts: Date.now(),
      space: "default",
      from: { id: "local.mallory", name: "mallory" },
      to: "local.alice",
      parts: [{ kind: "text", text: "decoy" }],
    };
    await nc.jetstream().publish(
      "cotal.default.inst.local.alice.local.mallory",
      new TextEncoder().encode(JSON.stringify(decoy)),
    );
    await nc.close();
    await new Promise((r) => setTimeout(r, 2_000));

    if (!online) await startMcp();
    const seen: string[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await call("wait", { timeout_seconds: 2 });
      if (r.error) console.log(`wait ${i}: error: ${r.error.slice(0, 160)}`);
      else {seen.push(...r.messages.map((m: { text: string; from: string }) =>
          `${m.from}: ${m.text}`
        ));}
    }
    console.log("alice's model saw:", JSON.stringify(seen));
    assert.ok(
      seen.some((s) => s.endsWith("genuine post")),
      "the operator's post was hidden by mallory's decoy",
    );
    const ambiguous = await call("reply", { message_id: postId, text: "my answer" });
    assert.match(ambiguous.error ?? "", /share the id .*pass from with the sender/);
    const poster = seen.find((s) => s.endsWith("genuine post"))!.split(":")[0];
    assert.notEqual(poster, "local.mallory");
    const answered = await call("reply", { message_id: postId, from: poster, text: "my answer" });
    assert.ok(answered.id, JSON.stringify(answered));
    if (online) await afterCompaction(url, root, mallory.inboxPrefix, call);
  } finally {
    await client?.close().catch(() => {});
    await cotal(["down", "--root", root], 120_000);
    await Deno.remove(root, { recursive: true }).catch(() => {});
  }
}

Deno.test("redteam28 - a DM reusing a channel post's id cannot hide the post from a model that was not running", () =>
  collide(false));

Deno.test("redteam28 - a DM reusing a channel post's id cannot hide the post from a running model", () =>
  collide(true));

/**
 * Red team 30, C1: the inbox drops read entries once its file passes 1 MiB and all of it is
 * read, and `reply` looked an id up in what was left. Mallory padded alice's inbox with 18 DMs
 * of 60 KiB; once her model had read them, the read operator post was gone from the file, and a
 * DM reusing its id was the only message with it: her model's answer to the post went to
 * mallory. The senders an id had are remembered past the compaction.
 */
async function afterCompaction(
  url: string,
  root: string,
  inboxPrefix: string,
  call: (name: string, args?: Record<string, unknown>) => Promise<Record<string, unknown>>,
) {
  const nc = await connect({
    servers: url,
    authenticator: credsAuthenticator(
      new TextEncoder().encode(await Deno.readTextFile(`${root}/mallory.creds`)),
    ),
    inboxPrefix,
  });
  const dm = (id: string, text: string) =>
    nc.jetstream().publish(
      "cotal.default.inst.local.alice.local.mallory",
      new TextEncoder().encode(JSON.stringify({
        id,
        ts: Date.now(),
        space: "default",
        from: { id: "local.mallory", name: "mallory" },
        to: "local.alice",
        parts: [{ kind: "text", text }],
      })),
    );
  const readAll = async (want: number) => {
    let got = 0;
    for (let i = 0; i < 20 && got < want; i++) {
      const r = await call("wait", { timeout_seconds: 3, max: 50 });
      got += ((r.messages as unknown[] | undefined) ?? []).length;
    }
    assert.equal(got, want);
  };
  try {
    const sub = nc.subscribe("cotal.default.chat.*.*.general", { max: 1 });
    await nc.flush();
    const sent = await cotal(["send", "--root", root, "--channel", "general", "second post"]);
    assert.equal(sent.code, 0, sent.stderr);
    let post = "";
    for await (const m of sub) post = JSON.parse(new TextDecoder().decode(m.data)).id;
    await readAll(1);
    for (let i = 0; i < 18; i++) await dm(crypto.randomUUID(), "x".repeat(60 * 1024));
    await readAll(18);
    await call("inbox"); // the client's next request: all read, the file compacted
    const size = (await Deno.stat(`${root}/inbox/inbox.jsonl`)).size;
    assert.ok(size < 64 * 1024, `the inbox was compacted (${size} bytes left)`);
    await dm(post, "decoy after the compaction");
    await readAll(1);
    const steered = await call("reply", { message_id: post, text: "the rollout key" });
    assert.match(String(steered.error ?? ""), /share the id .*pass from with the sender/);
    const gone = await call("reply", {
      message_id: post,
      from: "local.operator",
      text: "the rollout key",
    });
    assert.match(String(gone.error ?? ""), /was read and has left your inbox; answer with post/);
  } finally {
    await nc.close();
  }
}
