// Attacker: N relay connections x S identical subscriptions to a channel it may read, then
// posts to that channel: each post comes back N*S times through the supervisor's relay.
const [out, nArg, sArg, sizeArg, rateArg] = Deno.args;
const N = Number(nArg ?? 8),
  S = Number(sArg ?? 1000),
  SIZE = Number(sizeArg ?? 60000),
  RATE = Number(rateArg ?? 10);
const L = JSON.parse(await Deno.readTextFile(Deno.env.get("COTAL_LAUNCH")!));
const jwt = /-----BEGIN NATS USER JWT-----\s*(\S+?)\s*------END/.exec(L.auth.creds)![1];
const me = L.principal;
const enc = new TextEncoder();
let down = 0, errs = "", reopen = 0;
const conns: Deno.Conn[] = [];
async function open(i: number) {
  const c = await Deno.connect({ hostname: "127.0.0.1", port: 4222 });
  conns[i] = c;
  await c.write(
    enc.encode(
      `CONNECT {"jwt":"${jwt}","verbose":false,"pedantic":false,"protocol":1,"headers":true,"no_responders":true,"name":"amp${i}"}\r\n`,
    ),
  );
  let subs = "";
  for (let s = 1; s <= S; s++) subs += `SUB cotal.${L.space}.chat.*.*.general ${s}\r\n`;
  await c.write(enc.encode(subs + "PING\r\n"));
  (async () => {
    const buf = new Uint8Array(1 << 20);
    const dec = new TextDecoder();
    let last = "";
    while (true) {
      const n = await c.read(buf).catch(() => null);
      if (n === null) break;
      down += n;
      last = dec.decode(buf.subarray(Math.max(0, n - 300), n));
      const t = dec.decode(buf.subarray(0, Math.min(n, 200)));
      if (t.includes("-ERR")) errs = t.slice(0, 200);
      if (t.includes("PING\r\n")) c.write(enc.encode("PONG\r\n")).catch(() => {});
    }
    errs = `[conn ${i} closed: ${last.replace(/[\r\n]+/g, " ").slice(-160)}]`;
    reopen++;
    setTimeout(() => open(i).catch(() => {}), 200);
  })();
}
for (let i = 0; i < N; i++) await open(i).catch((e) => (errs += ` open${i}:${e.message}`));
const body = "x".repeat(SIZE);
const subj = `cotal.${L.space}.chat.${me.owner}.${me.actor}.general`;
let sent = 0;
const t0 = Date.now();
setInterval(() => {
  Deno.writeTextFileSync(
    out,
    `${Math.round((Date.now() - t0) / 1000)}s sent=${sent} reopen=${reopen} down=${
      Math.round(down / 1e6)
    }MB errs=${errs}\n`,
    { append: true },
  );
}, 2000);
while (true) {
  await conns[0].write(enc.encode(`PUB ${subj} ${body.length}\r\n${body}\r\n`)).catch(() => {});
  sent++;
  await new Promise((r) => setTimeout(r, 1000 / RATE));
}
