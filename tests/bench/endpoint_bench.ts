/**
 * CotalEndpoint multicast against raw npm:nats on the same broker, in the same run:
 * publish→receive latency (p50/p99) and pipelined throughput, plus the resident memory of an
 * endpoint process that has joined 10 channels.
 *
 *   deno run -A tests/bench/endpoint_bench.ts           # print the table
 *   deno run -A tests/bench/endpoint_bench.ts --write   # also update docs/BENCHMARKS.md
 *
 * Both columns run on one operator-mode broker with minted agent creds. The raw column is
 * what the endpoint does underneath without any of its own work: a JetStream publish with
 * `Nats-Msg-Id` of the same envelope bytes, and a core subscription on the same read filter
 * (its own channel, so neither column sees the other's traffic). Rounds alternate between the
 * columns so machine load hits both alike. Not a test: timings are reported, never asserted.
 */
import { connect, type NatsConnection } from "nats";
import { percentile, runContext, writeSection } from "./_report.ts";
import { CotalEndpoint, type CotalMessageEvent } from "../../lib/endpoint/mod.ts";
import { credsAuthenticatorFast } from "../../lib/trust/mod.ts";
import { buildMessage, encodeMessage } from "../../lib/wire/envelope.ts";
import { startMesh, type TestAgent } from "../endpoint/_mesh.ts";

const ROUNDS = 7;
const LATENCY_PER_ROUND = 300;
const THROUGHPUT_PER_ROUND = 5_000;
const IN_FLIGHT = 64;
const CHANNELS = Array.from({ length: 10 }, (_, i) => `room${i}`);

if (Deno.args.includes("--child")) await child();
else await main();

/** One way of sending a channel message and seeing it arrive. */
interface Column {
  name: string;
  send(): Promise<unknown>;
  received: number;
  next: (() => void)[];
  lat: number[];
  rate: number[];
}

function column(name: string, send: () => Promise<unknown>): Column {
  return { name, send, received: 0, next: [], lat: [], rate: [] };
}

function arrived(c: Column): void {
  c.received++;
  c.next.shift()?.();
}

async function main(): Promise<void> {
  await using mesh = await startMesh("bench");
  const policy = {
    subscribe: ["bench"],
    allowSubscribe: ["bench", "raw", "rawtuned", ...CHANNELS],
    allowPublish: ["bench", "raw", "rawtuned"],
  };
  const alice = await mesh.agent("alice", policy);
  const bob = await mesh.agent("bob", policy);
  const a = alice.endpoint({ watchPresence: false });
  const b = bob.endpoint({ watchPresence: false });
  await a.start();
  await b.start();
  const ours = column(
    "CotalEndpoint",
    () => a.multicast("benchmark payload", { channel: "bench" }),
  );
  b.addEventListener("message", (ev: CotalMessageEvent) => {
    if (ev.message.channel === "bench") arrived(ours);
  });
  // Raw: the same envelope bytes, JetStream-published with Nats-Msg-Id, read by a core
  // subscription on the same read filter. "Tuned" uses the two connect options the endpoint
  // sets (noAsyncTraces, noEcho); "defaults" is npm:nats out of the box.
  const raws: Column[] = [];
  const conns: NatsConnection[] = [];
  for (const [channel, tuned] of [["raw", false], ["rawtuned", true]] as const) {
    const pub = await rawConnect(mesh.url, alice, tuned);
    const sub = await rawConnect(mesh.url, bob, tuned);
    conns.push(pub, sub);
    const js = pub.jetstream();
    const subject = `cotal.${mesh.space}.chat.local.alice.${channel}`;
    const c = column(tuned ? "raw npm:nats, tuned" : "raw npm:nats, defaults", () => {
      const msg = buildMessage({
        space: mesh.space,
        from: { id: "local.alice", name: "alice" },
        channel,
        text: "benchmark payload",
      });
      return js.publish(subject, encodeMessage(msg), { msgID: msg.id });
    });
    sub.subscribe(`cotal.${mesh.space}.chat.*.*.${channel}`, { callback: () => arrived(c) });
    await sub.flush();
    raws.push(c);
  }
  const columns = [ours, ...raws];
  // Warm up every path (JIT, consumer pulls, stream files).
  for (let i = 0; i < 200; i++) for (const c of columns) await c.send();
  await new Promise((r) => setTimeout(r, 300));

  for (let round = 0; round < ROUNDS; round++) {
    // Latency: one message at a time, publish call to receive, columns interleaved.
    for (let i = 0; i < LATENCY_PER_ROUND; i++) {
      for (const c of columns) {
        const t0 = performance.now();
        const got = new Promise<void>((r) => c.next.push(r));
        await Promise.all([got, c.send()]);
        c.lat.push(performance.now() - t0);
      }
    }
    // Throughput: IN_FLIGHT acknowledged publishes kept in flight, until all are received.
    // The order rotates, so no column always meets a colder (or busier) broker.
    for (let k = 0; k < columns.length; k++) {
      const c = columns[(round + k) % columns.length];
      c.next = [];
      c.rate.push(await throughput(() => c.received, c.send));
    }
  }
  await a.stop();
  await b.stop();
  for (const nc of conns) await nc.close();

  const carol = await mesh.agent("carol", { subscribe: CHANNELS, allowPublish: [] });
  const rss = await childRss(mesh.url, mesh.space, carol, "endpoint");
  const bare = await childRss(mesh.url, mesh.space, carol, "bare");

  const med = (xs: number[]) => percentile(xs, 50);
  const p99 = (xs: number[]) => percentile(xs, 99);
  const [def, tuned] = raws;
  const row = (
    what: string,
    f: (c: Column) => number,
    fmt: (v: number) => string,
    rel: (o: number, r: number) => string,
  ) =>
    `| ${what} | ${columns.map((c) => fmt(f(c))).join(" | ")} | ${rel(f(ours), f(def))} | ${
      rel(f(ours), f(tuned))
    } |`;
  const table = [
    `| measure | ${
      columns.map((c) => c.name).join(" | ")
    } | endpoint vs defaults | endpoint vs tuned |`,
    "|---|---:|---:|---:|---:|---:|",
    row("multicast publish→receive p50", (c) => med(c.lat), ms, (o, r) => x(o / r)),
    row("multicast publish→receive p99", (c) => p99(c.lat), ms, (o, r) => x(o / r)),
    row(
      `throughput, ${IN_FLIGHT} acked publishes in flight (median round)`,
      (c) => med(c.rate),
      rate,
      (o, r) => pct(o / r),
    ),
  ].join("\n");
  const md = `## lib/endpoint: CotalEndpoint multicast vs raw npm:nats

${
    runContext("deno run -A tests/bench/endpoint_bench.ts --write")
  } One operator-mode broker, minted agent creds on every column; ${ROUNDS} rounds, each ${LATENCY_PER_ROUND} one-at-a-time messages per column (latency, interleaved) and ${
    THROUGHPUT_PER_ROUND.toLocaleString("en-US")
  } pipelined messages per column (throughput, order rotating). Raw = JetStream publish of the same envelope bytes with \`Nats-Msg-Id\` + a core subscription on the same read filter; "tuned" adds the two connect options the endpoint sets (\`noAsyncTraces\`, \`noEcho\`).

${table}

Resident memory after start (heartbeat running, presence watched, DM and delivery consumers bound) of a separate process: **${
    mb(rss)
  }** for an endpoint with ${CHANNELS.length} joined channels; ${
    mb(bare)
  } for a bare Deno process holding one npm:nats connection.

Targets: p50 latency ≤ 1.5× raw, throughput ≥ 60% of raw, an endpoint process with 10 joined channels ≤ 80 MB RSS.`;
  console.log(md);
  if (Deno.args.includes("--write")) await writeSection("endpoint", md);
}

async function throughput(received: () => number, send: () => Promise<unknown>): Promise<number> {
  const base = received();
  const t0 = performance.now();
  let sent = 0;
  const worker = async () => {
    while (sent < THROUGHPUT_PER_ROUND) {
      sent++;
      await send();
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
  while (received() - base < THROUGHPUT_PER_ROUND) await new Promise((r) => setTimeout(r, 1));
  return (THROUGHPUT_PER_ROUND * 1000) / (performance.now() - t0);
}

function rawConnect(servers: string, agent: TestAgent, tuned: boolean): Promise<NatsConnection> {
  return connect({
    servers,
    authenticator: credsAuthenticatorFast(agent.creds),
    inboxPrefix: `_INBOX_${agent.identity.id}`,
    ...(tuned ? { noAsyncTraces: true, noEcho: true } : {}),
  });
}

/** RSS of a child process running either an endpoint on 10 channels or a bare connection. */
async function childRss(
  servers: string,
  space: string,
  agent: TestAgent,
  mode: "endpoint" | "bare",
): Promise<number> {
  const proc = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", new URL(import.meta.url).pathname, "--child"],
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const w = proc.stdin.getWriter();
  await w.write(new TextEncoder().encode(JSON.stringify({
    mode,
    servers,
    space,
    creds: agent.creds,
    lifecycleUid: agent.lifecycleUid,
    inbox: agent.identity.id,
  })));
  await w.close();
  const out = await proc.output();
  return JSON.parse(new TextDecoder().decode(out.stdout)).rss;
}

async function child(): Promise<void> {
  const o = JSON.parse(await new Response(Deno.stdin.readable).text());
  if (o.mode === "bare") {
    const nc = await connect({
      servers: o.servers,
      authenticator: credsAuthenticatorFast(o.creds),
      inboxPrefix: `_INBOX_${o.inbox}`,
    });
    await new Promise((r) => setTimeout(r, 3_000));
    console.log(JSON.stringify({ rss: Deno.memoryUsage().rss }));
    await nc.close();
    return;
  }
  const ep = new CotalEndpoint({
    servers: o.servers,
    space: o.space,
    card: { name: "carol" },
    creds: o.creds,
    lifecycleUid: o.lifecycleUid,
    channels: CHANNELS,
  });
  await ep.start();
  // Let a few heartbeats and watches run before reading.
  await new Promise((r) => setTimeout(r, 3_000));
  if (ep.joinedChannels().length !== CHANNELS.length) throw new Error("not all channels joined");
  console.log(JSON.stringify({ rss: Deno.memoryUsage().rss }));
  await ep.stop();
}

function ms(v: number): string {
  return `${v.toFixed(2)} ms`;
}
function x(v: number): string {
  return `${v.toFixed(2)}×`;
}
function pct(v: number): string {
  return `${Math.round(v * 100)}%`;
}
function rate(v: number): string {
  return `${Math.round(v).toLocaleString("en-US")} msg/s`;
}
function mb(v: number): string {
  return `${(v / 1024 / 1024).toFixed(1)} MB`;
}
