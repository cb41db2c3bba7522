/**
 * What the relay's protocol guard costs a sandboxed agent: the same npm:nats traffic straight
 * to the broker, through the relay as it was (a byte copy) and through the guarded relay, on
 * one broker in one run. Each relayed column is the production path: a loopback TCP port (the
 * runner's forward inside the sandbox), a unix socket, the supervisor's relay, the broker.
 *
 *   deno run -A tests/bench/relay_bench.ts           # print the table
 *   deno run -A tests/bench/relay_bench.ts --write   # also update docs/BENCHMARKS.md
 *
 * Measured: JetStream publish round trip (publish → ack, one at a time), pipelined acked
 * publishes, and core publishes of 1 KiB received by a direct subscriber. Rounds alternate
 * between the columns. Not a test: timings are reported, never asserted.
 */
import { connect, type NatsConnection } from "nats";
import { percentile, runContext, writeSection } from "./_report.ts";
import { ByteBudget } from "../../lib/manager/sandbox/byte_budget.ts";
import { BrokerRelay, forwardToRelay, splice } from "../../lib/manager/sandbox/relay.ts";
import { credsAuthenticatorFast } from "../../lib/trust/mod.ts";
import { tempDir } from "../_harness/broker.ts";
import { startMesh } from "../endpoint/_mesh.ts";

const ROUNDS = 9;
const RTT_PER_ROUND = 300;
const ACKED_PER_ROUND = 3_000;
const CORE_PER_ROUND = 40_000;
const IN_FLIGHT = 64;

interface Column {
  name: string;
  nc: NatsConnection;
  rtt: number[];
  acked: number[];
  core: number[];
}

/** A relay that only copies bytes (the design before the guard). */
function plainRelay(path: string, broker: { hostname: string; port: number }): () => void {
  const l = Deno.listen({ transport: "unix", path });
  (async () => {
    for await (const c of l) {
      Deno.connect({ ...broker, transport: "tcp" }).then((up) => splice(c, up)).catch(() =>
        c.close()
      );
    }
  })().catch(() => {});
  return () => l.close();
}

function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

await using mesh = await startMesh("relaybench");
const alice = await mesh.agent("alice", { allowPublish: ["bench"], allowSubscribe: ["bench"] });
const inbox = `_INBOX_${alice.identity.id}`;
const dir = await tempDir("cotal-relay-bench-");
const url = new URL(mesh.url.replace(/^nats:/, "http:"));
const stopPlain = plainRelay(`${dir}/plain.sock`, {
  hostname: url.hostname,
  port: Number(url.port),
});
// The guard's cost only: the agent's byte budgets (256 KiB/s past 32 MiB; 16 KiB/s past 4 MiB on
// the stored planes) would hold this bench's floods back by design, so they are unbounded here.
const guarded = await BrokerRelay.listen(
  `${dir}/guarded.sock`,
  [mesh.url],
  { inboxPrefix: inbox },
  undefined,
  {
    all: new ByteBudget({ rate: Number.MAX_SAFE_INTEGER, burst: Number.MAX_SAFE_INTEGER }),
    stored: new ByteBudget({ rate: Number.MAX_SAFE_INTEGER, burst: Number.MAX_SAFE_INTEGER }),
  },
);
const plainPort = freePort();
const guardedPort = freePort();
const stops = [
  forwardToRelay(`${dir}/plain.sock`, plainPort),
  forwardToRelay(guarded.path, guardedPort),
];
const open = (servers: string) =>
  connect({
    servers,
    authenticator: credsAuthenticatorFast(alice.creds),
    inboxPrefix: inbox,
    noEcho: true,
  });
const columns: Column[] = [];
for (
  const [name, servers] of [
    ["direct", mesh.url],
    ["relay, byte copy", `127.0.0.1:${plainPort}`],
    ["relay, guarded", `127.0.0.1:${guardedPort}`],
  ]
) columns.push({ name, nc: await open(servers), rtt: [], acked: [], core: [] });

const subject = `cotal.${mesh.space}.chat.local.alice.bench`;
const sub = await connect({
  servers: mesh.url,
  authenticator: credsAuthenticatorFast(alice.creds),
  inboxPrefix: inbox,
});
let received = 0;
sub.subscribe(subject, { callback: () => received++ });
await sub.flush();
const payload = new Uint8Array(1024).fill(120);

async function acked(c: Column): Promise<number> {
  const js = c.nc.jetstream();
  const t0 = performance.now();
  let sent = 0;
  const worker = async () => {
    while (sent < ACKED_PER_ROUND) {
      sent++;
      await js.publish(subject, payload);
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
  return (ACKED_PER_ROUND * 1000) / (performance.now() - t0);
}

async function core(c: Column): Promise<number> {
  const base = received;
  const t0 = performance.now();
  for (let i = 0; i < CORE_PER_ROUND; i++) {
    c.nc.publish(subject, payload);
    if (i % 1000 === 999) await c.nc.flush();
  }
  await c.nc.flush();
  while (received - base < CORE_PER_ROUND) await new Promise((r) => setTimeout(r, 1));
  return (CORE_PER_ROUND * 1000) / (performance.now() - t0);
}

// Warm up every path.
for (const c of columns) for (let i = 0; i < 200; i++) await c.nc.jetstream().publish(subject);
for (let round = 0; round < ROUNDS; round++) {
  for (let i = 0; i < RTT_PER_ROUND; i++) {
    for (const c of columns) {
      const t0 = performance.now();
      await c.nc.jetstream().publish(subject, payload);
      c.rtt.push(performance.now() - t0);
    }
  }
  for (let k = 0; k < columns.length; k++) {
    const c = columns[(round + k) % columns.length];
    c.acked.push(await acked(c));
    c.core.push(await core(c));
  }
}
for (const c of columns) await c.nc.close();
await sub.close();
for (const s of stops) s();
stopPlain();
await guarded.close();

const med = (xs: number[]) => percentile(xs, 50);
const ms = (v: number) => `${v.toFixed(3)} ms`;
const rate = (v: number) => `${Math.round(v).toLocaleString("en-US")}/s`;
const [direct, plain, guard] = columns;
const row = (what: string, f: (c: Column) => number, fmt: (v: number) => string) =>
  `| ${what} | ${columns.map((c) => fmt(f(c))).join(" | ")} | ${
    (f(guard) / f(plain)).toFixed(2)
  }× | ${(f(guard) / f(direct)).toFixed(2)}× |`;
const md = `## Agent relay: the protocol guard's cost

${
  runContext("deno run -A tests/bench/relay_bench.ts --write")
} One operator-mode broker, one agent's minted creds on every column; each relayed column is the sandbox's path (loopback TCP → unix socket → supervisor relay → broker). ${ROUNDS} rounds; per round ${RTT_PER_ROUND} one-at-a-time JetStream publishes per column, then ${
  ACKED_PER_ROUND.toLocaleString("en-US")
} acked publishes with ${IN_FLIGHT} in flight and ${
  CORE_PER_ROUND.toLocaleString("en-US")
} core publishes of 1 KiB to a direct subscriber (order rotating; medians shown).

| measure | ${columns.map((c) => c.name).join(" | ")} | guarded / byte copy | guarded / direct |
|---|---:|---:|---:|---:|---:|
${row("JetStream publish → ack p50", (c) => med(c.rtt), ms)}
${row("JetStream publish → ack p99", (c) => percentile(c.rtt, 99), ms)}
${row(`acked publishes, ${IN_FLIGHT} in flight`, (c) => med(c.acked), rate)}
${row("core publishes of 1 KiB, received", (c) => med(c.core), rate)}

Target: the guarded relay within 10 % of the byte-copy relay on throughput.`;
console.log(md);
if (Deno.args.includes("--write")) await writeSection("relay", md);
