/**
 * A loopback TCP relay in front of a real broker that records what each client presented in
 * its CONNECT line, so a test can observe which credential an endpoint actually sent (and
 * that it sent none at all when its credential was dead). `dropAll()` cuts every relayed
 * connection, like a network blip.
 */

/** One CONNECT line a client sent. */
export interface SeenConnect {
  at: number;
  jwt?: string;
  auth_token?: string;
  name?: string;
}

/** A running relay. */
export interface Relay {
  url: string;
  /** TCP connections accepted so far. */
  readonly accepted: number;
  connects: SeenConnect[];
  dropAll(): void;
  /** Cut every connection and refuse new ones until {@linkcode Relay.resume}. */
  pause(): void;
  resume(): void;
  close(): Promise<void>;
}

/** Relay `127.0.0.1:<free port>` to `targetPort`. */
export function startRelay(targetPort: number): Relay {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const open = new Set<Deno.Conn>();
  const connects: SeenConnect[] = [];
  let accepted = 0;
  let paused = false;
  const pipe = async (from: Deno.Conn, to: Deno.Conn, sniff: boolean) => {
    let head = "";
    const buf = new Uint8Array(64 * 1024);
    try {
      for (;;) {
        const n = await from.read(buf);
        if (n === null) break;
        const chunk = buf.subarray(0, n);
        if (sniff) {
          head += new TextDecoder().decode(chunk);
          const m = /CONNECT (\{.*?\})\r\n/.exec(head);
          if (m) {
            const c = JSON.parse(m[1]);
            connects.push({ at: Date.now(), jwt: c.jwt, auth_token: c.auth_token, name: c.name });
            sniff = false;
          } else if (head.length > 256 * 1024) sniff = false;
        }
        let off = 0;
        while (off < chunk.length) off += await to.write(chunk.subarray(off));
      }
    } catch {
      // One side closed.
    } finally {
      for (const c of [from, to]) {
        try {
          c.close();
        } catch { /* already closed */ }
        open.delete(c);
      }
    }
  };
  (async () => {
    for await (const client of listener) {
      accepted++;
      if (paused) {
        client.close();
        continue;
      }
      let server: Deno.Conn;
      try {
        server = await Deno.connect({ hostname: "127.0.0.1", port: targetPort });
      } catch {
        client.close();
        continue;
      }
      open.add(client);
      open.add(server);
      void pipe(client, server, true);
      void pipe(server, client, false);
    }
  })().catch(() => {});
  return {
    url: `nats://127.0.0.1:${(listener.addr as Deno.NetAddr).port}`,
    get accepted() {
      return accepted;
    },
    connects,
    dropAll() {
      for (const c of open) {
        try {
          c.close();
        } catch { /* already closed */ }
      }
      open.clear();
    },
    pause() {
      paused = true;
      this.dropAll();
    },
    resume() {
      paused = false;
    },
    async close() {
      listener.close();
      this.dropAll();
      await new Promise((r) => setTimeout(r, 10));
    },
  };
}
