/**
 * Red team 44: a `--net host` agent reaches a host loopback service that is not its relay
 * without calling connect(2): TCP Fast Open (`sendto(..., MSG_FASTOPEN, addr)` on an unconnected
 * TCP socket, IPv4, IPv6 and v4-mapped IPv6, and `TCP_FASTOPEN_CONNECT`), and UDP to the same
 * port by sendto, sendmsg, a connected socket and a v4-mapped address. The connect guard
 * (`lib/manager/sandbox/connect_guard.ts`) hooks connect and sendmsg and filters loopback
 * egress; a TFO send takes the connect path through `sendmsg`, so it must be caught too.
 *
 * The service (`rt44_fixtures/tfo_listen.py`) runs in the stack's namespace (the "host") on
 * 127.0.0.1 and ::1, TCP (fast open enabled) and UDP; the agent
 * (`rt44_fixtures/tfo_dial.py`) is a program under `--net host`.
 *
 * Passes when the service logs no connection and no datagram from the agent.
 */
import assert from "node:assert/strict";
import { rt44Stack, sleep, waitFor } from "./rt44_fixtures/stack.ts";

Deno.test({
  name: "red team 44 - a --net host agent cannot reach a loopback service by TCP fast open",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const s = await rt44Stack("tfo", ["tfo_listen.py", "tfo_dial.py"]);
    let svc: Deno.ChildProcess | undefined;
    const svcLog = `${s.work}/svc.log`;
    const port = String(Number(s.port) + 2);
    try {
      const up = await s.cotal(["up", "--port", s.port, "--detach"], 170_000);
      assert.equal(up.code, 0, up.out);
      svc = s.spawnInNs(["/usr/bin/python3", `${s.work}/a/tfo_listen.py`, port, svcLog]);
      assert.match(await waitFor(svcLog, /listening/, 10_000), /listening/);
      const m = await s.spawnAgent("mallory", "tfo_dial.py", [port, "tfo.log"], true);
      assert.equal(m.code, 0, m.out);
      const log = await waitFor(`${s.work}/a/tfo.log`, /^done$/m, 25_000);
      await sleep(1_000);
      const seen = await Deno.readTextFile(svcLog).catch(() => "");
      console.log(`agent:\n${log.trim()}\nservice:\n${seen.trim()}`);
      assert.match(log, /^done$/m, "the agent ran");
      assert.doesNotMatch(seen, /^(tcp|udp) /m, `the host service was reached:\n${seen}`);
    } finally {
      await s.cotal(["despawn", "mallory"], 90_000).catch(() => {});
      try {
        svc?.kill("SIGKILL");
        await svc?.status;
      } catch {
        // Gone.
      }
      await s.close();
    }
  },
});
