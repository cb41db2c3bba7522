/**
 * The supervisor's two lines into a sandbox: the broker relay (a unix socket relayed to the
 * broker, bounded per agent) and the control channel (a stop, and the runner's end when the
 * supervisor goes), over real sockets.
 */
import {
  AGENT_BYTES_BURST,
  AGENT_BYTES_PER_SECOND,
  AGENT_STORED_BYTES_BURST,
  AGENT_STORED_BYTES_PER_SECOND,
  ByteBudget,
} from "../../lib/manager/sandbox/byte_budget.ts";
import assert from "node:assert/strict";
import { ControlChannel, followControl } from "../../lib/manager/sandbox/control_channel.ts";
import {
  BrokerRelay,
  forwardToRelay,
  MAX_RELAY_CONNECTIONS,
  RELAY_CONNECT_RATE,
  RELAY_REWRITE_RATE,
} from "../../lib/manager/sandbox/relay.ts";
import { tempDir, waitFor } from "../_harness/broker.ts";

/** A stand-in broker: greets every connection, echoes what it gets. */
function echoServer(): { port: number; close(): void; accepted(): number } {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  let n = 0;
  (async () => {
    for await (const c of l) {
      n++;
      (async () => {
        await c.write(new TextEncoder().encode("INFO {}\r\n"));
        await c.readable.pipeTo(c.writable).catch(() => {});
      })().catch(() => {});
    }
  })().catch(() => {});
  return { port: (l.addr as Deno.NetAddr).port, close: () => l.close(), accepted: () => n };
}

const GUARD = { inboxPrefix: "_INBOX_test" };

async function readSome(c: Deno.Conn): Promise<string> {
  const buf = new Uint8Array(256);
  let timer: ReturnType<typeof setTimeout> | undefined;
  const n = await Promise.race([
    c.read(buf),
    new Promise<never>((_, reject) =>
      timer = setTimeout(() => reject(new Error("timed out reading the relay")), 10_000)
    ),
  ]).finally(() => clearTimeout(timer));
  return new TextDecoder().decode(buf.subarray(0, n ?? 0));
}

Deno.test("channels - the relay carries bytes both ways, and at most 16 connections per agent", async () => {
  const dir = await tempDir("cotal-relay-");
  const broker = echoServer();
  const relay = await BrokerRelay.listen(`${dir}/0.broker`, [
    "nats://127.0.0.1:1", // refused: the relay moves on to the next server
    `nats://127.0.0.1:${broker.port}`,
  ], GUARD);
  const conns: Deno.UnixConn[] = [];
  try {
    const c = await Deno.connect({ transport: "unix", path: relay.path });
    conns.push(c);
    assert.equal(await readSome(c), "INFO {}\r\n");
    await c.write(new TextEncoder().encode("PING\r\n"));
    assert.equal(await readSome(c), "PING\r\n");
    assert.equal((await Deno.stat(relay.path)).mode! & 0o777, 0o600);
    for (let i = 0; i < MAX_RELAY_CONNECTIONS + 8; i++) {
      conns.push(await Deno.connect({ transport: "unix", path: relay.path }));
    }
    await waitFor(() => relay.connections === MAX_RELAY_CONNECTIONS, { what: "the cap" });
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(broker.accepted(), MAX_RELAY_CONNECTIONS);
  } finally {
    for (const c of conns) c.close();
    await relay.close();
    broker.close();
  }
  await assert.rejects(Deno.stat(`${dir}/0.broker`), Deno.errors.NotFound);
});

Deno.test("channels - an agent opening and closing relay connections in a loop is held to its connection rate (red team 14)", async () => {
  const dir = await tempDir("cotal-relay-churn-");
  const broker = echoServer();
  const relay = await BrokerRelay.listen(
    `${dir}/0.broker`,
    [`nats://127.0.0.1:${broker.port}`],
    GUARD,
  );
  try {
    // Twice the burst, opened and closed as fast as the socket allows.
    for (let i = 0; i < 2 * RELAY_CONNECT_RATE.burst; i++) {
      (await Deno.connect({ transport: "unix", path: relay.path })).close();
    }
    await waitFor(() => relay.connectsHeld > 0, { what: "the connection rate to hold one back" });
    await waitFor(() => relay.connections === 0, { what: "the churned connections to end" });
  } finally {
    await relay.close();
    broker.close();
  }
});

Deno.test("channels - lines the guard must re-write are held to their own rate, far within the byte budget (red team 15)", async () => {
  const dir = await tempDir("cotal-relay-rewrite-");
  const broker = echoServer();
  const relay = await BrokerRelay.listen(
    `${dir}/0.broker`,
    [`nats://127.0.0.1:${broker.port}`],
    GUARD,
  );
  const c = await Deno.connect({ transport: "unix", path: relay.path });
  try {
    assert.equal(await readSome(c), "INFO {}\r\n");
    await c.write(new TextEncoder().encode('CONNECT {"verbose":false}\r\n'));
    // Bare-LF PINGs: five bytes each, a re-written line each; 2 x the burst is ~200 KB, well
    // inside the 32 MiB byte burst, so only the re-write rate can hold it back.
    const flood = new TextEncoder().encode("PING\n".repeat(RELAY_REWRITE_RATE.burst));
    await c.write(flood);
    await c.write(flood);
    await waitFor(() => relay.throttled > 0, { what: "the re-write rate to hold the agent back" });
  } finally {
    c.close();
    await relay.close();
    broker.close();
  }
});

Deno.test("channels - the runner's loopback forward reaches the broker through the relay", async () => {
  const dir = await tempDir("cotal-relay-");
  const broker = echoServer();
  const relay = await BrokerRelay.listen(`${dir}/0.broker`, [`127.0.0.1:${broker.port}`], GUARD);
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  const stop = forwardToRelay(relay.path, port);
  try {
    const c = await Deno.connect({ hostname: "127.0.0.1", port });
    assert.equal(await readSome(c), "INFO {}\r\n");
    c.close();
  } finally {
    stop();
    await relay.close();
    broker.close();
  }
});

Deno.test("channels - a stop reaches the runner; a runner also stops when the line drops", async () => {
  const dir = await tempDir("cotal-ctl-");
  const ctl = await ControlChannel.listen(`${dir}/0.control`);
  let stopped = 0;
  const unfollow = await followControl(ctl.path, () => stopped++);
  assert.ok(await ctl.connected(2_000));
  // Junk from the agent's side is read and dropped; the channel keeps working.
  const junk = await Deno.connect({ transport: "unix", path: ctl.path });
  await junk.write(new Uint8Array(100_000)).catch(() => {});
  ctl.requestStop();
  await waitFor(() => stopped === 1, { what: "the stop" });
  unfollow();
  junk.close();
  // A second runner (a restart) that dials after the stop hears it at once.
  let late = 0;
  await followControl(ctl.path, () => late++);
  await waitFor(() => late === 1, { what: "the stop, for a late runner" });
  await ctl.close();
  // The supervisor gone: a following runner is told.
  const ctl2 = await ControlChannel.listen(`${dir}/1.control`);
  let dropped = 0;
  await followControl(ctl2.path, () => dropped++);
  await ctl2.close();
  await waitFor(() => dropped === 1, { what: "the drop" });
});

Deno.test("channels - a runner that stops answering pings is reported once; an agent's own line cannot answer for it", async () => {
  const dir = await tempDir("cotal-ctl-");
  const timings = { pingEveryMs: 50, hungAfterMs: 400 };
  const ctl = await ControlChannel.listen(`${dir}/0.control`, undefined, timings);
  let reported = 0;
  ctl.onSilent(() => reported++);
  try {
    // A live runner answers every ping: never reported.
    const unfollow = await followControl(ctl.path, () => {});
    await new Promise((r) => setTimeout(r, 1_000));
    assert.equal(reported, 0);
    assert.ok(ctl.silentMs()! < 400, `silent for ${ctl.silentMs()} ms`);
    unfollow();
    await waitFor(() => ctl.silentMs() === undefined, { what: "the runner's line gone" });
    // A frozen runner: its line is open and reads nothing. The agent dials in beside it and
    // writes pongs on its own line: they are drained, not heard.
    const frozen = await Deno.connect({ transport: "unix", path: ctl.path });
    const agent = await Deno.connect({ transport: "unix", path: ctl.path });
    const pong = new TextEncoder().encode("pong\n");
    const forging = setInterval(() => agent.write(pong).catch(() => {}), 20);
    try {
      await waitFor(() => reported === 1, { timeoutMs: 5_000, what: "the silent runner reported" });
      await new Promise((r) => setTimeout(r, 600));
      assert.equal(reported, 1, "reported once per runner");
    } finally {
      clearInterval(forging);
      frozen.close();
      agent.close();
    }
    // Its restart (a new line) is watched afresh.
    await waitFor(() => ctl.silentMs() === undefined, { what: "the frozen line gone" });
    const again = await Deno.connect({ transport: "unix", path: ctl.path });
    await waitFor(() => reported === 2, { timeoutMs: 5_000, what: "the restarted runner watched" });
    again.close();
  } finally {
    await ctl.close();
  }
});

Deno.test("channels - an agent past its byte budget is held back, not cut off: every byte arrives", async () => {
  const dir = await tempDir("cotal-relay-");
  const broker = echoServer();
  // A small budget so the test crosses it: 64 KiB at once, 256 KiB/s after.
  const budget = new ByteBudget({ rate: 256 * 1024, burst: 64 * 1024 });
  const relay = await BrokerRelay.listen(
    `${dir}/0.broker`,
    [`127.0.0.1:${broker.port}`],
    GUARD,
    undefined,
    { all: budget },
  );
  const c = await Deno.connect({ transport: "unix", path: relay.path });
  try {
    assert.equal(await readSome(c), "INFO {}\r\n");
    const body = "x".repeat(1000);
    const msg = new TextEncoder().encode(
      `PUB cotal.s.chat.local.a.g ${body.length}\r\n${body}\r\n`,
    );
    const count = 300; // about 300 KB: past the burst
    const sending = (async () => {
      for (let i = 0; i < count; i++) await c.write(msg);
    })();
    // The echo returns what went on to the broker: all of it, in order.
    let got = 0;
    const buf = new Uint8Array(65536);
    while (got < msg.length * count) {
      const n = await c.read(buf);
      if (n === null) break;
      got += n;
    }
    await sending;
    assert.equal(got, msg.length * count);
    assert.ok(relay.throttled > 0, "the budget never held the agent back");
  } finally {
    c.close();
    await relay.close();
    broker.close();
  }
});

Deno.test("channels - the byte budget: a burst, then the rate", () => {
  let now = 0;
  const b = new ByteBudget({ rate: 1000, burst: 5000, now: () => now });
  assert.equal(b.take(5000), 0);
  assert.equal(b.take(500), 500);
  now += 1500;
  assert.equal(b.take(1000), 0);
  assert.equal(b.held, 1);
  assert.equal(AGENT_BYTES_PER_SECOND, 256 * 1024);
  assert.equal(AGENT_BYTES_BURST, 32 * 1024 * 1024);
});

Deno.test("channels - posts, DMs and tasks spend the stricter stored-plane budget; other traffic does not", async () => {
  const dir = await tempDir("cotal-relay-");
  const broker = echoServer();
  const stored = new ByteBudget({ rate: 64 * 1024, burst: 16 * 1024 });
  const relay = await BrokerRelay.listen(
    `${dir}/0.broker`,
    [`127.0.0.1:${broker.port}`],
    { inboxPrefix: "_INBOX_test", storedPrefixes: ["cotal.s.chat.", "cotal.s.inst."] },
    undefined,
    { stored },
  );
  const c = await Deno.connect({ transport: "unix", path: relay.path });
  const send = async (subject: string, count: number) => {
    const body = "x".repeat(1000);
    const msg = new TextEncoder().encode(`PUB ${subject} ${body.length}\r\n${body}\r\n`);
    const writing = (async () => {
      for (let i = 0; i < count; i++) await c.write(msg);
    })();
    let got = 0;
    const buf = new Uint8Array(65536);
    while (got < msg.length * count) {
      const n = await c.read(buf);
      if (n === null) break;
      got += n;
    }
    await writing;
    assert.equal(got, msg.length * count);
  };
  try {
    assert.equal(await readSome(c), "INFO {}\r\n");
    // 100 KB of presence heartbeats: not a stored plane, never held.
    await send("$KV.cotal_presence_s.local.a", 100);
    assert.equal(relay.throttled, 0);
    // 100 KB of DMs: past the 16 KiB burst, held back, all delivered.
    await send("cotal.s.inst.local.b.local.a", 100);
    assert.ok(relay.throttled > 0);
  } finally {
    c.close();
    await relay.close();
    broker.close();
  }
  assert.equal(AGENT_STORED_BYTES_PER_SECOND, 16 * 1024);
  assert.equal(AGENT_STORED_BYTES_BURST, 4 * 1024 * 1024);
});
