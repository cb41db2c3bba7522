/**
 * `cotal mcp` as a real process, driven by the MCP SDK's own `Client` over its stdio transport,
 * against a real broker: two agents converse (a post, a DM, a task and its reply), refusals
 * come back as one-sentence tool errors, `wait` returns on arrival and on timeout, and what was
 * not read survives a restart of the server while nothing is returned twice.
 */
import assert from "node:assert/strict";
import { tempDir } from "../_harness/broker.ts";
import { startDaemonProcess, startDeliverySpace } from "../delivery/_helpers.ts";
import { CONFIG, COTAL, mcpArgs, provision, startMcp } from "./_mcp_agent.ts";
import { newLifecycleUid } from "../../lib/wire/mod.ts";

Deno.test("mcp - two agents converse through the SDK client: a post, a DM, a task and its reply; refusals are tool errors", async () => {
  await using s = await startDeliverySpace({ prefix: "mcp" });
  // The space's delivery daemon: it says whether a DM's or a task's recipient exists.
  const daemon = startDaemonProcess(s);
  const alice = await startMcp(s, await provision(s, "alice"));
  const bob = await startMcp(s, await provision(s, "bob", "reviewer"));
  try {
    await daemon.waitForLine(/delivery daemon up/, 40_000);
    const { tools } = await alice.client.listTools();
    assert.deepEqual(tools.map((t: { name: string }) => t.name).sort(), [
      "channels",
      "dm",
      "history",
      "inbox",
      "post",
      "presence",
      "reply",
      "task",
      "wait",
    ]);
    for (const t of tools) {
      assert.equal(t.inputSchema.additionalProperties, false, `${t.name} is strict`);
      assert.ok(t.description && t.description.length > 20, t.name);
    }

    // A post reaches the peer's wait.
    assert.equal(
      (await alice.call("post", { channel: "general", text: "hello all" })).isError,
      false,
    );
    let got = await bob.call("wait", { timeout_seconds: 20 });
    assert.deepEqual(
      got.json.messages.map((
        m: { kind: string; from: string; text: string },
      ) => [m.kind, m.from, m.text]),
      [["channel", "local.alice", "hello all"]],
    );
    // A DM.
    await alice.call("dm", { to: "local.bob", text: "psst" });
    got = await bob.call("wait", { timeout_seconds: 20 });
    assert.deepEqual(
      got.json.messages.map((m: { kind: string; text: string }) => [m.kind, m.text]),
      [[
        "dm",
        "psst",
      ]],
    );
    // A task waited on, answered by the role's agent with reply.
    const asked = alice.call("task", { role: "reviewer", text: "review #42", wait_seconds: 30 });
    asked.catch(() => {}); // Awaited below; a failure before that must not surface as uncaught.
    got = await bob.call("wait", { timeout_seconds: 20 });
    const task = got.json.messages[0];
    assert.deepEqual([task.kind, task.role, task.text], ["task", "reviewer", "review #42"]);
    const replied = await bob.call("reply", { message_id: task.id, text: "looks good" });
    assert.equal(replied.isError, false, replied.text);
    const answer = await asked;
    assert.equal(answer.isError, false, answer.text);
    assert.equal(answer.json.reply.text, "looks good");
    assert.equal(answer.json.reply.replyTo, answer.json.id);
    // The awaited reply was handed out once: alice's inbox does not hold it again.
    assert.deepEqual((await alice.call("inbox")).json.messages, []);

    // Presence and history.
    const peers = (await alice.call("presence")).json.peers.map((p: { id: string }) => p.id);
    assert.ok(peers.includes("local.bob"), JSON.stringify(peers));
    const hist = await bob.call("history", { channel: "general", limit: 5 });
    assert.ok(hist.json.messages.some((m: { text: string }) => m.text === "hello all"));

    // Refusals: one sentence each, nothing sent.
    const refusals: [string, Record<string, unknown>, RegExp][] = [
      ["post", { channel: "general", text: "x", colour: "red" }, /"colour" is not an argument/],
      ["post", { channel: "general" }, /text is required/],
      ["dm", { to: "local.bob", text: "x".repeat(70_000) }, /over 60000; send large content/],
      ["wait", { timeout_seconds: 9999 }, /timeout_seconds must be a whole number from 1 to 300/],
      ["reply", { message_id: "nope", text: "x" }, /No message "nope" is in your inbox/],
      ["channels", { action: "join" }, /join needs a channel/],
      ["nosuch", {}, /There is no tool "nosuch"/],
      // The broker would acknowledge these and keep nothing (newcomer pass 8).
      ["dm", { to: "local.nobody", text: "x" }, /local\.nobody has no agent in this space/],
      [
        "task",
        { role: "nosuchrole", text: "x" },
        /No agent in this space was ever given the role "nosuchrole"/,
      ],
    ];
    for (const [tool, args, re] of refusals) {
      const r = await alice.call(tool, args);
      assert.equal(r.isError, true, `${tool} ${JSON.stringify(args)}: ${r.text}`);
      assert.match(r.text, re);
      assert.ok(!r.text.includes("\n"), `one sentence: ${r.text}`);
    }
    // Outside the grants: the broker refuses, the tool says so.
    const outside = await alice.call("post", { channel: "secret", text: "x" });
    assert.equal(outside.isError, true, outside.text);
    assert.match(outside.text, /secret/);
    assert.deepEqual((await bob.call("inbox")).json.messages, [], "nothing reached bob");

    // wait returns on its timeout with nothing.
    const t0 = Date.now();
    const idle = await bob.call("wait", { timeout_seconds: 1 });
    assert.deepEqual(idle.json.messages, []);
    assert.ok(Date.now() - t0 >= 900, "waited out its timeout");
  } finally {
    await alice.close();
    await bob.close();
    daemon.kill();
    await daemon.exited;
  }
});

/** Waits (10 s at most) until `n` lines are in the inbox file in `dir`. */
async function inboxHolds(dir: string, n: number): Promise<void> {
  for (let i = 0; i < 50; i++) {
    const text = await Deno.readTextFile(`${dir}/inbox.jsonl`).catch(() => "");
    if (text.trim().split("\n").filter(Boolean).length === n) return;
    await new Promise((r) => setTimeout(r, 200));
  }
}

Deno.test("mcp - what was not read survives a kill -9 and restart of cotal mcp; what was returned and not yet shown taken comes again, nothing else twice", async () => {
  await using s = await startDeliverySpace({ prefix: "mcprs" });
  const alice = await startMcp(s, await provision(s, "alice"));
  const bobAgent = await provision(s, "bob");
  let bob = await startMcp(s, bobAgent);
  try {
    for (const n of [1, 2, 3]) await alice.call("dm", { to: "local.bob", text: `m${n}` });
    // All three are in bob's inbox before one is read.
    await inboxHolds(bob.inbox, 3);
    const first = await bob.call("inbox", { max: 1 });
    assert.deepEqual(first.json.messages.map((m: { text: string }) => m.text), ["m1"]);
    assert.equal(first.json.more, true);
    // The next request shows the client took m1: read now, on disk.
    const second = await bob.call("inbox", { max: 1 });
    assert.deepEqual(second.json.messages.map((m: { text: string }) => m.text), ["m2"]);
    // kill -9: what was written (and acked to the broker) is in the page cache, which outlives
    // the process, though the inbox is not synced per message.
    Deno.kill(bob.pid, "SIGKILL");
    await bob.close().catch(() => {});
    // Sent while bob's server is down: the broker keeps it for bob's DM queue.
    await alice.call("dm", { to: "local.bob", text: "m4" });
    bob = await startMcp(s, bobAgent, bob.inbox);
    const texts: string[] = [];
    for (let i = 0; i < 20 && texts.length < 3; i++) {
      const r = await bob.call("wait", { timeout_seconds: 5 });
      texts.push(...r.json.messages.map((m: { text: string }) => m.text));
    }
    // m2 was returned and the server killed before a request showed the client took it: it
    // comes again (fault pass 8: a client killed with such an answer in its pipe lost it).
    assert.deepEqual(texts, ["m2", "m3", "m4"]);
    assert.deepEqual((await bob.call("inbox")).json.messages, []);
  } finally {
    await alice.close();
    await bob.close();
  }
});

Deno.test("mcp - what was not read survives losing the inbox with the process (a sandbox's RAM home): the broker keeps it until it is read", async () => {
  await using s = await startDeliverySpace({ prefix: "mcpram" });
  const alice = await startMcp(s, await provision(s, "alice"));
  const bobAgent = await provision(s, "bob");
  let bob = await startMcp(s, bobAgent);
  try {
    for (const n of [1, 2, 3]) await alice.call("dm", { to: "local.bob", text: `m${n}` });
    await inboxHolds(bob.inbox, 3);
    // m1 is read (the next request shows it taken); m2 and m3 are only in the inbox file.
    const first = await bob.call("inbox", { max: 1 });
    assert.deepEqual(first.json.messages.map((m: { text: string }) => m.text), ["m1"]);
    await bob.call("presence");
    // Fault pass 9: a sandboxed agent's inbox is on its RAM home, gone with its runner; the
    // copies were acked once written there, and every unread DM was lost.
    Deno.kill(bob.pid, "SIGKILL");
    await bob.close().catch(() => {});
    await Deno.remove(bob.inbox, { recursive: true });
    bob = await startMcp(s, bobAgent);
    const texts: string[] = [];
    // Delivered again once the first server's unsettled copies pass their ack wait (60 s).
    for (let i = 0; i < 20 && texts.length < 2; i++) {
      const r = await bob.call("wait", { timeout_seconds: 10 });
      texts.push(...r.json.messages.map((m: { text: string }) => m.text));
    }
    assert.deepEqual(texts.sort(), ["m2", "m3"]);
    assert.deepEqual((await bob.call("inbox")).json.messages, []);
  } finally {
    await alice.close();
    await bob.close();
  }
});

Deno.test("mcp - a client that closes stdin ends cotal mcp, with exit code 0", async () => {
  await using s = await startDeliverySpace({ prefix: "mcpeof" });
  const who = await provision(s, "carol");
  const dir = await tempDir("cotal-mcp-eof-");
  await Deno.writeTextFile(`${dir}/agent.creds`, who.creds, { mode: 0o600 });
  const child = new Deno.Command(Deno.execPath(), {
    args: mcpArgs(s, who, `${dir}/agent.creds`, `${dir}/inbox`),
    env: { HOME: dir },
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const w = child.stdin.getWriter();
  await w.write(new TextEncoder().encode(
    JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: {
        protocolVersion: "2025-06-18",
        capabilities: {},
        clientInfo: { name: "t", version: "1" },
      },
    }) + "\n",
  ));
  // The answer first: the server is up and serving.
  const reader = child.stdout.getReader();
  const { value } = await reader.read();
  assert.match(new TextDecoder().decode(value), /"serverInfo":\{"name":"cotal"/);
  await w.close();
  const timer = setTimeout(() => child.kill("SIGKILL"), 20_000);
  const st = await child.status;
  clearTimeout(timer);
  reader.releaseLock();
  await child.stdout.cancel();
  const err = new TextDecoder().decode(await new Response(child.stderr).arrayBuffer());
  assert.equal(st.code, 0, `exited by itself (not killed at the deadline): ${err}`);
});

Deno.test("mcp - cotal mcp without what it joins with is refused with a sentence, exit 2", async () => {
  const dir = await tempDir("cotal-mcp-usage-");
  const cases: [string[], RegExp][] = [
    [
      [],
      /cotal mcp needs --launch <file> \(or \$COTAL_LAUNCH, as in a spawned agent\) or --creds <file>/,
    ],
    [["--creds", `${dir}/agent.creds`], /--creds needs --space and --lifecycle \(/],
    [
      ["--creds", `${dir}/missing.creds`, "--space", "s", "--lifecycle-uid", "a".repeat(26)],
      /The creds file ".*missing\.creds" cannot be read/,
    ],
    // Newcomer pass 8 was told to "mint one with newLifecycleUid()".
    [
      ["--creds", `${dir}/agent.creds`, "--space", "s", "--lifecycle", "nope"],
      /--lifecycle "nope" is not a lifecycle uid; pass the one 'cotal mint --provision' printed/,
    ],
  ];
  for (const [args, re] of cases) {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", `--config=${CONFIG}`, COTAL, "mcp", ...args],
      env: { HOME: dir, COTAL_LAUNCH: "" },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
    const err = new TextDecoder().decode(out.stderr);
    assert.equal(out.code, 2, `${args.join(" ")}: ${err}`);
    assert.match(err, re);
    assert.equal(new TextDecoder().decode(out.stdout), "", "nothing on the protocol channel");
  }
});

Deno.test("mcp - cotal mcp --creds with another lifecycle's uid says so, not that the cred lacks a grant", async () => {
  await using s = await startDeliverySpace({ prefix: "mcpuid" });
  const bob = await provision(s, "bob");
  const dir = await tempDir("cotal-mcp-uid-");
  const file = `${dir}/bob.creds`;
  await Deno.writeTextFile(file, bob.creds, { mode: 0o600 });
  const other = { ...bob, uid: newLifecycleUid() };
  const out = await new Deno.Command(Deno.execPath(), {
    args: mcpArgs(s, other, file, `${dir}/inbox`),
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(60_000),
  }).output();
  const err = new TextDecoder().decode(out.stderr);
  assert.notEqual(out.code, 0, err);
  assert.match(
    err,
    /not the lifecycle the cred was provisioned with; pass the uid 'cotal mint --provision' printed/,
  );
});
