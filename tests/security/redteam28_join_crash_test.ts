/**
 * Red team 28: the operator's interactive `cotal join` prints every message and every presence
 * change from inside the endpoint's event listeners (lib/mesh/join.ts `describe`, `who`). A
 * member's channel post with `parts: [null]` (receive.ts checks only that parts is an array), or
 * a presence row whose `card.role` is `{"toString":0,"valueOf":0}` (parsePresence checks only
 * id, name, status, ts), throws inside the listener. Passes when the defence holds: the join
 * session is still running afterwards and prints the operator's later post.
 */
import assert from "node:assert/strict";
import { connect, credsAuthenticator } from "nats";
import { rt28Port } from "./rt28_fixtures/port.ts";
import { cotal } from "./rt28_fixtures/cotal.ts";

const CHECKOUT = new URL("../..", import.meta.url).pathname.replace(/\/$/, "");
const COTAL = `${CHECKOUT}/cmd/cotal.ts`;
const NOPRIM = { toString: 0, valueOf: 0 };

type Poison = (nc: Awaited<ReturnType<typeof connect>>) => Promise<void>;

async function attackJoin(tag: string, poison: Poison) {
  const root = `/tmp/cotal-rt28-join-${tag}`;
  await Deno.remove(root, { recursive: true }).catch(() => {});
  const port = rt28Port();
  const url = `nats://127.0.0.1:${port}`;
  const up = await cotal(["up", "--root", root, "--port", String(port), "--detach"], 170_000);
  assert.equal(up.code, 0, up.stderr);
  let join: Deno.ChildProcess | undefined;
  let writer: WritableStreamDefaultWriter<Uint8Array> | undefined;
  try {
    const r = await cotal([
      ...["mint", "--root", root, "--profile", "agent", "--provision", "--channel", "general"],
      ...["--actor", "mallory", "--out", `${root}/mallory.creds`, "--json"],
    ]);
    assert.equal(r.code, 0, r.stderr);
    const mallory = JSON.parse(r.stdout) as { inboxPrefix: string };
    join = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", COTAL, "join", "--root", root, "--as", "opjoin"],
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    writer = join.stdin.getWriter();
    const collecting = join.output();
    await new Promise((r) => setTimeout(r, 6_000));
    const nc = await connect({
      servers: url,
      authenticator: credsAuthenticator(
        new TextEncoder().encode(await Deno.readTextFile(`${root}/mallory.creds`)),
      ),
      inboxPrefix: mallory.inboxPrefix,
    });
    await poison(nc);
    await nc.close();
    await new Promise((r) => setTimeout(r, 3_000));
    const sent = await cotal(["send", "--root", root, "--channel", "general", "after the poison"]);
    assert.equal(sent.code, 0, sent.stderr);
    await new Promise((r) => setTimeout(r, 3_000));
    await writer.close().catch(() => {});
    writer = undefined;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const out = await Promise.race([
      collecting,
      new Promise<undefined>((res) => timer = setTimeout(() => res(undefined), 15_000)),
    ]);
    clearTimeout(timer);
    if (out === undefined) {
      join.kill("SIGTERM");
      await collecting;
    }
    join = undefined;
    const dec = new TextDecoder();
    const printed = out ? dec.decode(out.stdout) : "";
    const err = out ? dec.decode(out.stderr) : "";
    console.log(`[${tag}] join exit ${out?.code}; stdout:`, JSON.stringify(printed.slice(-600)));
    console.log(
      `[${tag}] join stderr:`,
      err.trim().split("\n").slice(0, 3).join(" | ").slice(0, 400),
    );
    assert.match(
      printed,
      /after the poison/,
      `the operator's join (${tag}) stopped before the later post`,
    );
  } finally {
    await writer?.close().catch(() => {});
    if (join) {
      try {
        join.kill("SIGTERM");
      } catch { /* ended */ }
      await join.status;
    }
    await cotal(["down", "--root", root], 120_000);
    await Deno.remove(root, { recursive: true }).catch(() => {});
  }
}

Deno.test("redteam28 - a channel post with parts [null] cannot end the operator's cotal join", async () => {
  await attackJoin("parts", async (nc) => {
    const body = {
      id: crypto.randomUUID(),
      ts: Date.now(),
      space: "default",
      from: { id: "local.mallory", name: "mallory" },
      channel: "general",
      parts: [null],
    };
    const ack = await nc.jetstream().publish(
      "cotal.default.chat.local.mallory.general",
      new TextEncoder().encode(JSON.stringify(body)),
      { msgID: body.id },
    );
    console.log("poison post stored", ack.stream, ack.seq);
  });
});

Deno.test("redteam28 - a presence row whose role is not a string cannot end the operator's cotal join", async () => {
  await attackJoin("presence", async (nc) => {
    const kv = await nc.jetstream().views.kv("cotal_presence_default", { bindOnly: true });
    const row = {
      card: {
        id: "local.mallory",
        name: "mallory",
        owner: "local",
        actor: "mallory",
        role: NOPRIM,
      },
      status: "idle",
      ts: Date.now(),
    };
    const seq = await kv.put("local.mallory", JSON.stringify(row));
    console.log("poison presence stored", seq);
  });
});
