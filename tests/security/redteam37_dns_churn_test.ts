/**
 * Red team 37: the connect rate of a --net host agent (`connect_guard.ts`: 64 per 2 s) does not
 * count connects to port 53 of the host's loopback: the program jumps to "allow" for the DNS
 * port before the counters. First run: 79,703 connects to 127.0.0.1:53 in 2 s from one
 * process (the cap is 64). Against a resolver on the host's loopback (systemd-resolved on
 * 127.0.0.53, dnsmasq, unbound) that is an unmetered connection flood, and closing first
 * leaves TIME_WAIT ports towards it. Here a stand-in TCP service listens on 127.0.0.53:53 in
 * the stack's namespace; the agent churns connections to it for 12 s while a host process
 * connects. The test passes when the agent's connects there stay within the connect rate.
 * About a minute.
 */
import assert from "node:assert/strict";
import { rt37Stack, sleep } from "./rt37_fixtures/stack.ts";

const SERVICE = `
import socket, select
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.53", 53)); s.listen(4096); s.setblocking(False)
conns = set()
while True:
    r = select.select([s, *conns], [], [], 1)[0]
    for c in r:
        if c is s:
            try: n, _ = s.accept(); n.setblocking(False); conns.add(n)
            except OSError: pass
        else:
            try: d = c.recv(4096)
            except OSError: d = b""
            if not d: conns.discard(c); c.close()
`;
const PROBE = `
import socket
ok = bad = 0; why = {}
for i in range(50):
    s = socket.socket(); s.settimeout(2)
    try: s.connect(("127.0.0.53", 53)); ok += 1
    except OSError as e: bad += 1; why[str(e)] = why.get(str(e), 0) + 1
    s.close()
print("host connects ok", ok, "failed", bad, why)
`;

Deno.test({
  name:
    "red team 37 - a --net host agent's connects to the host's DNS port on loopback are within its connect rate",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const s = await rt37Stack("dn", ["dns_churn.py"]);
    let svc: Deno.ChildProcess | undefined;
    try {
      const up = await s.cotal(["up", "--port", s.port, "--detach"], 170_000);
      assert.equal(up.code, 0, up.out);
      svc = new Deno.Command("nsenter", {
        args: [`--net=/proc/${s.holder}/ns/net`, "/usr/bin/python3", "-c", SERVICE],
        stdout: "null",
        stderr: "null",
      }).spawn();
      await sleep(1_000);
      const before = await s.inNs(["/usr/bin/python3", "-c", PROBE]);
      console.log("before:", before.out.trim());
      const m = await s.spawnHostAgent("mallory", "dns_churn.py", ["127.0.0.53", "2", "12"]);
      assert.equal(m.code, 0, m.out);
      await sleep(6_000);
      const during = await s.inNs(["/usr/bin/python3", "-c", PROBE]);
      console.log("during:", during.out.trim());
      let log = "";
      for (let i = 0; i < 40 && !/done/.test(log); i++) {
        await sleep(1_000);
        log = await Deno.readTextFile(`${s.work}/a/churn.log`).catch(() => "");
      }
      console.log("agent:\n" + log.trim());
      let ok = 0;
      for (const m of log.matchAll(/'ok': (\d+)/g)) ok += Number(m[1]);
      // 64 per 2 s window over 12 s, with slack for window edges (unguarded: ~160,000).
      assert.ok(ok <= 64 * 8, `the agent opened ${ok} connections to 127.0.0.53:53 in 12 s`);
    } finally {
      try {
        svc?.kill("SIGKILL");
        await svc?.status;
      } catch {
        // Gone.
      }
      await s.cotal(["despawn", "mallory"], 90_000).catch(() => {});
      await s.close();
    }
  },
});
