/**
 * Red team 49's hostile client, run inside an agent's sandbox with no imports: it reads its own
 * launch file, dials its relay with a raw NATS client, proves the launch creds and sends a
 * CONNECT of its choice. Usage: `deno run -A raw_connect.ts <out file> <mode> [args...]`.
 *
 * Modes:
 * - `burst <n>`: n connects one after the other (each CONNECT + PING, then close); each outcome
 *   ("ok" for a PONG, or the -ERR text) is appended to the out file as a JSON line.
 * - `connect <json extra>`: one connect whose CONNECT carries the extra fields, then PING and a
 *   SUB/PUB probe named by `probe` (see below); the lines the broker sent are written out.
 * - `hold <n> <seconds>`: n connections held open for that long.
 */
const [out, mode, ...rest] = Deno.args;
const launch = JSON.parse(Deno.readTextFileSync(Deno.env.get("COTAL_LAUNCH")!));
const creds: string = launch.auth.creds;
const jwt = /-----BEGIN NATS USER JWT-----\n([^\n]+)\n/.exec(creds)![1];
const seed = /-----BEGIN USER NKEY SEED-----\n([^\n]+)\n/.exec(creds)![1];
const server: string = launch.servers[0];
const [host, port] = server.replace(/^[a-z]+:\/\//, "").split(":");

function log(o: unknown) {
  Deno.writeTextFileSync(out, JSON.stringify(o) + "\n", { append: true });
}

function b32(s: string): Uint8Array {
  const a = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
  const bytes: number[] = [];
  let bits = 0;
  let val = 0;
  for (const c of s) {
    val = (val << 5) | a.indexOf(c);
    bits += 5;
    if (bits >= 8) {
      bytes.push((val >>> (bits - 8)) & 0xff);
      bits -= 8;
    }
  }
  return new Uint8Array(bytes);
}

const raw = b32(seed).slice(2, 34);
const pkcs8 = new Uint8Array([
  0x30,
  0x2e,
  0x02,
  0x01,
  0x00,
  0x30,
  0x05,
  0x06,
  0x03,
  0x2b,
  0x65,
  0x70,
  0x04,
  0x22,
  0x04,
  0x20,
  ...raw,
]);
const key = await crypto.subtle.importKey("pkcs8", pkcs8, { name: "Ed25519" }, false, ["sign"]);
async function sign(nonce: string): Promise<string> {
  const s = new Uint8Array(
    await crypto.subtle.sign("Ed25519", key, new TextEncoder().encode(nonce)),
  );
  return btoa(String.fromCharCode(...s)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

class Lines {
  buf = "";
  reader: ReadableStreamDefaultReader<Uint8Array>;
  dec = new TextDecoder();
  constructor(readonly conn: Deno.Conn) {
    this.reader = conn.readable.getReader();
  }
  async next(ms: number): Promise<string | undefined> {
    const deadline = Date.now() + ms;
    for (;;) {
      const nl = this.buf.indexOf("\n");
      if (nl >= 0) {
        const l = this.buf.slice(0, nl).replace(/\r$/, "");
        this.buf = this.buf.slice(nl + 1);
        return l;
      }
      const left = deadline - Date.now();
      if (left <= 0) return undefined;
      const r = await Promise.race([
        this.reader.read(),
        new Promise<undefined>((res) => setTimeout(() => res(undefined), left)),
      ]);
      if (!r || r.done) return r === undefined ? undefined : "EOF";
      this.buf += this.dec.decode(r.value, { stream: true });
    }
  }
}

async function open(
  extra: Record<string, unknown> = {},
): Promise<{ conn: Deno.Conn; lines: Lines; first: string }> {
  const conn = await Deno.connect({ hostname: host, port: Number(port) });
  const lines = new Lines(conn);
  const info = await lines.next(5_000);
  if (!info?.startsWith("INFO ")) {
    return { conn, lines, first: `no INFO: ${info}` };
  }
  const nonce = JSON.parse(info.slice(5)).nonce;
  const connect = {
    verbose: false,
    pedantic: false,
    protocol: 1,
    headers: true,
    no_responders: true,
    lang: "raw",
    version: "1",
    jwt,
    sig: await sign(nonce),
    ...extra,
  };
  await conn.write(new TextEncoder().encode(`CONNECT ${JSON.stringify(connect)}\r\nPING\r\n`));
  let first = "";
  for (;;) {
    const l = await lines.next(8_000);
    if (l === undefined) {
      first = "timeout";
      break;
    }
    if (l.startsWith("INFO ")) continue;
    first = l;
    break;
  }
  return { conn, lines, first };
}

function close(c: Deno.Conn) {
  try {
    c.close();
  } catch {
    // gone
  }
}

if (mode === "burst") {
  const n = Number(rest[0]);
  for (let i = 0; i < n; i++) {
    try {
      const { conn, first } = await open();
      log({ i, at: Date.now(), first });
      close(conn);
    } catch (e) {
      log({ i, at: Date.now(), first: `error ${(e as Error).message}` });
    }
  }
} else if (mode === "connect") {
  const extra = JSON.parse(rest[0] ?? "{}");
  const probe: string[] = JSON.parse(rest[1] ?? "[]");
  const { conn, lines, first } = await open(extra);
  log({ first });
  if (first === "PONG") {
    await conn.write(new TextEncoder().encode(probe.map((l) => `${l}\r\n`).join("") + "PING\r\n"));
    const seen: string[] = [];
    for (;;) {
      const l = await lines.next(4_000);
      if (l === undefined || l === "EOF") break;
      seen.push(l.slice(0, 400));
      if (l === "PONG") break;
    }
    log({ seen });
  }
  close(conn);
} else if (mode === "ask") {
  // Requests on `subjects` (JSON array of [subject, body]) with replies under its own inbox.
  const own = JSON.parse(atob(jwt.split(".")[1].replace(/-/g, "+").replace(/_/g, "/"))).sub;
  const asks: [string, string][] = JSON.parse(rest[0] ?? "[]");
  const { conn, lines, first } = await open();
  log({ first, own });
  if (first === "PONG") {
    const ops = [`SUB _INBOX_${own}.> 1`];
    asks.forEach(([subj, body], i) => {
      const b = new TextEncoder().encode(body);
      ops.push(`PUB ${subj} _INBOX_${own}.r${i} ${b.length}\r\n${body}`);
    });
    await conn.write(new TextEncoder().encode(ops.map((l) => `${l}\r\n`).join("")));
    const seen: string[] = [];
    const until = Date.now() + 8_000;
    while (Date.now() < until && seen.length < 200) {
      const l = await lines.next(Math.min(3_000, until - Date.now()));
      if (l === undefined || l === "EOF") break;
      seen.push(l.slice(0, 3000));
    }
    log({ seen });
  }
  close(conn);
} else if (mode === "hold") {
  const n = Number(rest[0]);
  const secs = Number(rest[1]);
  const held: Deno.Conn[] = [];
  for (let i = 0; i < n; i++) {
    try {
      const { conn, first } = await open();
      log({ i, first });
      held.push(conn);
    } catch (e) {
      log({ i, first: `error ${(e as Error).message}` });
    }
  }
  await new Promise((r) => setTimeout(r, secs * 1000));
  held.forEach(close);
}
log({ done: true });
