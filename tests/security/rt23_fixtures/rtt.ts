// Victim: PING/PONG round trips through its own relay, the worst per 2 s logged.
const out = Deno.args[0];
const L = JSON.parse(await Deno.readTextFile(Deno.env.get("COTAL_LAUNCH")!));
const jwt = /-----BEGIN NATS USER JWT-----\s*(\S+?)\s*------END/.exec(L.auth.creds)![1];
const enc = new TextEncoder();
const c = await Deno.connect({ hostname: "127.0.0.1", port: 4222 });
await c.write(
  enc.encode(
    `CONNECT {"jwt":"${jwt}","verbose":false,"pedantic":false,"protocol":1,"name":"rtt"}\r\n`,
  ),
);
const buf = new Uint8Array(65536);
let pongs = 0;
(async () => {
  while (true) {
    const n = await c.read(buf).catch(() => null);
    if (n === null) break;
    const t = new TextDecoder().decode(buf.subarray(0, n));
    pongs += (t.match(/PONG/g) ?? []).length;
    if (t.includes("PING\r\n")) c.write(enc.encode("PONG\r\n"));
  }
})();
let worst = 0, count = 0, t0 = Date.now();
while (true) {
  const before = pongs;
  const s = performance.now();
  await c.write(enc.encode("PING\r\n"));
  while (pongs === before && performance.now() - s < 30000) {
    await new Promise((r) => setTimeout(r, 2));
  }
  const ms = performance.now() - s;
  worst = Math.max(worst, ms);
  count++;
  if (Date.now() - t0 > 2000) {
    Deno.writeTextFileSync(
      out,
      `${new Date().toISOString()} n=${count} worst=${Math.round(worst)}ms\n`,
      { append: true },
    );
    worst = 0;
    count = 0;
    t0 = Date.now();
  }
  await new Promise((r) => setTimeout(r, 100));
}
