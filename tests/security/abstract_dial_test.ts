/**
 * A `--net host` agent shares the host's network namespace, and with it every abstract unix
 * socket (`@name`) the host's services listen on: a desktop bus, an X server, a container
 * runtime's shim. No mount hides them, and a cgroup hook for unix connects cannot read the name.
 * Its sandbox takes Landlock's abstract-socket scope before anything else runs
 * (`lib/manager/sandbox/landlock.ts`), so a connect or a datagram to a name made outside the
 * sandbox is refused. Here a host service listens on a stream and a datagram name and the agent
 * dials both; without the scope both arrive. About 30 s.
 */
import assert from "node:assert/strict";
import { rt37Stack, sleep } from "./rt37_fixtures/stack.ts";

const HOST_SERVICE = `
import socket, sys, time
name = sys.argv[1]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.bind("\\0" + name + "-stream"); s.listen(4)
g = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); g.bind("\\0" + name + "-dgram")
s.settimeout(0.5); g.settimeout(0.5)
print("listening", flush=True)
end = time.time() + float(sys.argv[2])
while time.time() < end:
    try:
        c, _ = s.accept(); c.settimeout(2); print("stream accepted:", c.recv(100)); c.close()
    except OSError:
        pass
    try:
        print("dgram received:", g.recv(100))
    except OSError:
        pass
`;

Deno.test({
  name:
    "a --net host agent can neither connect nor send to an abstract unix socket a host service listens on",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const s = await rt37Stack("ad", ["abstract_dial.py"]);
    try {
      const up = await s.cotal(["up", "--port", s.port, "--detach"], 170_000);
      assert.equal(up.code, 0, up.out);
      const name = `cotal-svc-${crypto.randomUUID().slice(0, 8)}`;
      const host = s.inNs(["/usr/bin/python3", "-c", HOST_SERVICE, name, "40"], 90_000);
      await sleep(1_000);
      const m = await s.spawnHostAgent("mallory", "abstract_dial.py", [name]);
      assert.equal(m.code, 0, m.out);
      let log = "";
      for (let i = 0; i < 45 && !/done/.test(log); i++) {
        await sleep(1_000);
        log = await Deno.readTextFile(`${s.work}/a/dial.log`).catch(() => "");
      }
      await s.cotal(["despawn", "mallory"], 90_000).catch(() => {});
      const seen = (await host).out;
      console.log("agent:\n" + log.trim());
      console.log("host:\n" + seen.trim());
      assert.match(seen, /listening/, "the host service listened");
      assert.match(log, /done/, "the agent ran its dials");
      assert.match(log, /stream: Operation not permitted/);
      assert.match(log, /dgram: Operation not permitted/);
      assert.doesNotMatch(seen, /accepted|received/, "nothing from the agent reached the host");
    } finally {
      await s.close();
    }
  },
});
