/**
 * Red team 19b, attacks P and D: what the supervisor unit's directives leave a compromised
 * supervisor that reaches other spaces without touching their files.
 *
 * P: the units share the host's network namespace and only delivery and the signer have
 * IPAddressDeny=; no unit restricts which ports it may bind (SocketBindAllow=/SocketBindDeny=).
 * Every daemon of every space dials fixed loopback ports (the broker's, 4222; each space's auth
 * service, 4280 + i). Whenever one of them is not bound (the broker's or an auth service's
 * restart, Restart=on-failure RestartSec=2s; or a port rendered by M1) a supervisor can bind it
 * first and play the broker / auth service for every other space.
 *
 * D: every space's supervisor may write the state dir's filesystem (ReadWritePaths=/var/lib/cotal:
 * run/, logs/, its store dir, its agents' dir), which also holds the broker's JetStream store,
 * the signer's audit trail and every other space's creds; nothing bounds how much it writes.
 */
import assert from "node:assert/strict";
import { defaultSystemdLayout, renderUnits } from "../../lib/mesh/systemd.ts";
import { fakeHost } from "./_redteam19b_root.ts";

function directives(text: string): Map<string, string[]> {
  const m = new Map<string, string[]>();
  for (const line of text.split("\n")) {
    const i = line.indexOf("=");
    if (i <= 0 || line.startsWith("[")) continue;
    m.set(line.slice(0, i), [...(m.get(line.slice(0, i)) ?? []), line.slice(i + 1)]);
  }
  return m;
}

const USER_AUTH = { idp: "https://idp.example.test/", host: "127.0.0.1", port: 4280 };

// P1: alpha's supervisor listens on beta's auth-service port (4281) while it is free, as its own
// uid with its unit's groups; the unit has nothing that refuses the bind.
Deno.test({
  name:
    "redteam19b P1 - a space's supervisor cannot bind the fixed ports other spaces' daemons dial (skipped: known gap, not fixed; SocketBindDeny= on the supervisor's unit would also refuse its agents' relay forward in their own network namespaces, which share its cgroup)",
  ignore: true,
  async fn() {
    const units = renderUnits({ ...defaultSystemdLayout(["alpha", "beta"]), userAuth: USER_AUTH });
    const sup = directives(units["cotal-supervise-alpha.service"]);
    const restricted = sup.has("SocketBindDeny") || sup.has("PrivateNetwork");
    const h = await fakeHost();
    try {
      // Beta's auth service port (4281), if nothing on this machine holds it.
      const bound = await h.deno(
        h.sup("alpha"),
        `try { const l = Deno.listen({ hostname: "127.0.0.1", port: 4281 }); console.log("bound"); l.close(); } catch (e) { console.log("refused " + e.name); }`,
      );
      console.log({ restricted, bind: bound.out.trim() });
      assert.ok(
        restricted || !bound.out.includes("bound"),
        "cotal-supervise-alpha may listen on 127.0.0.1:4281 (beta's auth service) and 4222 (the broker) when they are free",
      );
    } finally {
      await h.close();
    }
  },
});

// D1: alpha's supervisor reserves 2 GiB in the shared run dir (instant with fallocate): the same
// filesystem as the broker's JetStream store and beta's signer's audit trail and creds.
Deno.test({
  name:
    "redteam19b D1 - a space's supervisor cannot fill the state dir's filesystem under the other spaces' daemons (skipped: known gap, not fixed; needs per-user disk quotas or a volume per space, which the units cannot set)",
  ignore: true,
  async fn() {
    const h = await fakeHost();
    try {
      const r = await h.sh(
        h.sup("alpha"),
        `fallocate -l 2G run/.fill && stat -c %s run/.fill; rm -f run/.fill`,
      );
      console.log({ code: r.code, out: r.out.trim(), err: r.err.trim() });
      assert.notEqual(r.code, 0, `alpha reserved ${r.out.trim()} bytes beside every space's state`);
    } finally {
      await h.close();
    }
  },
});
