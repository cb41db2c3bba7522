/**
 * The auth service's HTTP listener on its own: it answers what `fetch` sends, refuses malformed
 * requests with a sentence and a code, holds at most HTTP_MAX_CONNECTIONS (the oldest idle one
 * goes for the newest), and ends a connection that does not deliver its request in time. The
 * daemon under red team 48's descriptor flood is tests/security/redteam48_fd_fill_test.ts.
 */
import assert from "node:assert/strict";
import {
  HTTP_MAX_BODY_BYTES,
  HTTP_MAX_CONNECTIONS,
  HTTP_REQUEST_DEADLINE_MS,
  serveHttp,
} from "../../lib/auth/http_server.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

function echoServer() {
  return serveHttp({ hostname: "127.0.0.1", port: 0 }, async (req) => {
    const body = await req.text();
    return Response.json({ method: req.method, path: new URL(req.url).pathname, body }, {
      headers: { "x-seen": req.headers.get("x-test") ?? "" },
    });
  });
}

/** Sends `raw` on a fresh connection and returns what comes back before the close. */
async function raw(port: number, text: string | Uint8Array): Promise<string> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  try {
    const bytes = typeof text === "string" ? enc.encode(text) : text;
    for (let at = 0; at < bytes.length;) at += await conn.write(bytes.subarray(at));
    let out = "";
    const buf = new Uint8Array(4096);
    // The server closes after its answer; a server that did not would fail here, not hang.
    const deadline = setTimeout(() => conn.close(), 10_000);
    try {
      for (;;) {
        const n = await conn.read(buf).catch(() => null);
        if (n === null) return out;
        out += dec.decode(buf.subarray(0, n));
      }
    } finally {
      clearTimeout(deadline);
    }
  } finally {
    try {
      conn.close();
    } catch {
      // Closed by the server.
    }
  }
}

Deno.test("auth http - it answers fetch's GET and POST, one request per connection", async () => {
  const s = echoServer();
  try {
    const url = `http://127.0.0.1:${s.addr.port}`;
    const get = await fetch(`${url}/health`, { headers: { "x-test": "yes" } });
    assert.equal(get.status, 200);
    assert.equal(get.headers.get("x-seen"), "yes");
    assert.deepEqual(await get.json(), { method: "GET", path: "/health", body: "" });
    const post = await fetch(`${url}/exchange`, { method: "POST", body: "x".repeat(50_000) });
    assert.deepEqual(await post.json(), {
      method: "POST",
      path: "/exchange",
      body: "x".repeat(50_000),
    });
    const reply = await raw(s.addr.port, "GET /a HTTP/1.1\r\nhost: x\r\n\r\n");
    assert.match(reply, /^HTTP\/1\.1 200 /);
    assert.match(reply, /\r\nconnection: close\r\n/);
  } finally {
    await s.shutdown();
  }
});

Deno.test("auth http - a malformed request gets its status, a sentence and a code", async () => {
  const s = echoServer();
  try {
    const cases: [string | Uint8Array, number, string][] = [
      ["BREW /pot HTCPCP/1.0\r\n\r\n", 400, "bad_request"],
      ["GET http://elsewhere/ HTTP/1.1\r\n\r\n", 400, "bad_request"],
      [
        "POST /x HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        411,
        "length_required",
      ],
      ["POST /x HTTP/1.1\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\nab", 400, "bad_request"],
      ["POST /x HTTP/1.1\r\ncontent-length: -1\r\n\r\n", 400, "bad_request"],
      ["GET /x HTTP/1.1\r\nbad header\r\n\r\n", 400, "bad_request"],
      [`GET /x HTTP/1.1\r\nx: ${"a".repeat(9_000)}\r\n\r\n`, 431, "head_too_large"],
      [
        `POST /x HTTP/1.1\r\ncontent-length: ${HTTP_MAX_BODY_BYTES + 1}\r\n\r\n${
          "y".repeat(HTTP_MAX_BODY_BYTES + 1)
        }`,
        413,
        "body_too_large",
      ],
    ];
    for (const [req, status, code] of cases) {
      const reply = await raw(s.addr.port, req);
      const what = typeof req === "string" ? req.slice(0, 60) : "bytes";
      assert.match(reply, new RegExp(`^HTTP/1\\.1 ${status} `), what);
      const body = JSON.parse(reply.slice(reply.indexOf("\r\n\r\n") + 4));
      assert.equal(body.code, code, what);
      assert.match(body.error, /\.$/, what);
    }
  } finally {
    await s.shutdown();
  }
});

Deno.test("auth http - it holds at most its cap of connections: the oldest idle ones go, a request still gets in", async () => {
  const s = echoServer();
  const idle: Deno.Conn[] = [];
  try {
    for (let i = 0; i < HTTP_MAX_CONNECTIONS + 40; i++) {
      idle.push(await Deno.connect({ hostname: "127.0.0.1", port: s.addr.port }));
    }
    const res = await fetch(`http://127.0.0.1:${s.addr.port}/ok`);
    assert.equal(res.status, 200);
    await res.body?.cancel();
    // The first ones were closed by the server (a read ends), the last ones are held.
    let timer: ReturnType<typeof setTimeout> | undefined;
    const first = await Promise.race([
      idle[0].read(new Uint8Array(16)).catch(() => null),
      new Promise<"open">((ok) => timer = setTimeout(() => ok("open"), 5_000)),
    ]);
    clearTimeout(timer);
    assert.equal(first, null, "the oldest idle connection was closed");
    let open = 0;
    await Promise.all(idle.map(async (c) => {
      const r = await Promise.race([
        c.read(new Uint8Array(16)).catch(() => null),
        new Promise<"open">((ok) => setTimeout(() => ok("open"), 300)),
      ]);
      if (r === "open") open++;
    }));
    assert.ok(open <= HTTP_MAX_CONNECTIONS, `${open} held`);
    assert.ok(open > 0);
  } finally {
    for (const c of idle) {
      try {
        c.close();
      } catch {
        // Closed by the server.
      }
    }
    await s.shutdown();
  }
});

Deno.test("auth http - a connection that does not deliver its request in time is closed", async () => {
  const s = echoServer();
  try {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port: s.addr.port });
    await conn.write(enc.encode("POST /slow HTTP/1.1\r\ncontent-length: 10\r\n\r\nabc"));
    const started = Date.now();
    const cut = setTimeout(() => conn.close(), HTTP_REQUEST_DEADLINE_MS + 10_000);
    const got = await conn.read(new Uint8Array(64)).catch(() => null);
    clearTimeout(cut);
    assert.equal(got, null);
    const waited = Date.now() - started;
    assert.ok(waited >= HTTP_REQUEST_DEADLINE_MS - 200, `closed after ${waited} ms`);
    try {
      conn.close();
    } catch {
      // Closed by the server.
    }
  } finally {
    await s.shutdown();
  }
});
