/**
 * Red team 19b, attack T: what a compromised supervisor prepares in the paths tmpfiles touches
 * as root at every boot (`z` globs `manager.*.agents.json` and `agent.*.creds`, the `z` lines of
 * the `$SYS` cred names, the recursive `Z` on its `agents/` dir), then `systemd-tmpfiles --create`
 * runs again as root. Relative links are used so they resolve the same under `--root` as on a
 * booted host. Goal: root chowns or chmods something of another space, the signer or the audit
 * trail, or a hard link makes tmpfiles hand the supervisor a file it does not own.
 */
import assert from "node:assert/strict";
import { UNIT_USERS } from "../../lib/mesh/systemd.ts";
import { fakeHost, why } from "./_redteam19b_root.ts";

Deno.test({
  name:
    `redteam19b T1 - links planted under tmpfiles' z/Z names make root chown nothing of another space, the signer or the audit${why}`,
  ignore: why !== "",
  async fn() {
    const h = await fakeHost();
    try {
      const A = h.spaceDir("alpha");
      const B = h.spaceDir("beta");
      const bHex = B.slice("secrets/".length);
      const targets = [
        `${B}/supervisor.creds`,
        `${B}/delivery.creds`,
        `${B}/connection-evictor.creds`,
        B,
        "secrets/auth",
        "secrets/auth/broker.json",
        "audit/signer.jsonl",
        "audit",
        `agents/space.${bHex.slice("space.".length)}`,
      ];
      const before = new Map<string, Deno.FileInfo>();
      for (const t of targets) before.set(t, await Deno.lstat(`${h.R}/${t}`));
      const script = [
        `cd ${A}`,
        // The $SYS cred name that was never provisioned: only a z line covers it.
        `ln -s ../${bHex}/supervisor.creds membership-observer.creds`,
        // The z globs: the supervisor's own names, aimed elsewhere.
        `ln -s ../${bHex}/delivery.creds manager.evil.agents.json`,
        `ln -s ../../audit/signer.jsonl agent.evil.creds`,
        `ln -s ../auth/broker.json agent.auth.creds`,
        `ln -s ../${bHex} manager.dir.agents.json`,
        // The recursive Z: agents/ as a link to beta's dir, or a dir holding links.
        `mkdir -p agents2/sub && ln -s ../../${bHex}/connection-evictor.creds agents2/sub/x.creds`,
        `ln -s ../../auth agents2/auth`,
        `ln -s ../../../agents/space.${bHex.slice("space.".length)} agents2/beta-agents`,
        `ln -s ../${bHex} agents`,
        "echo planted",
      ].join(" && ");
      const plant = await h.sh(h.sup("alpha"), script);
      assert.equal(plant.code, 0, plant.err);
      const boot1 = await h.tmpfiles();
      // Swap: agents/ as a real dir full of links, for the next boot.
      const swap = await h.sh(
        h.sup("alpha"),
        `cd ${A} && rm agents && mv agents2 agents && echo ok`,
      );
      assert.equal(swap.code, 0, swap.err);
      const boot2 = await h.tmpfiles();
      console.log({ boot1: boot1.err.trim().slice(0, 400), boot2: boot2.err.trim().slice(0, 400) });
      for (const t of targets) {
        const a = before.get(t)!;
        const b = await Deno.lstat(`${h.R}/${t}`);
        assert.equal(b.uid, a.uid, `${t}: owner changed to ${b.uid}`);
        assert.equal(b.gid, a.gid, `${t}: group changed to ${b.gid}`);
        assert.equal(b.mode, a.mode, `${t}: mode changed`);
      }
      // And alpha still reads none of them.
      for (
        const t of [
          `${A}/membership-observer.creds`,
          `${A}/manager.evil.agents.json`,
          `${A}/agent.auth.creds`,
          `${A}/agents/sub/x.creds`,
        ]
      ) {
        const r = await h.sh(h.sup("alpha"), `cat '${t}'`);
        assert.notEqual(r.code, 0, `alpha read ${t}: ${r.out}`);
      }
    } finally {
      await h.close();
    }
  },
});

// T2: a hard link is the one thing tmpfiles' z/Z would chown through (it is the file). The
// supervisor links the signer's files of its own space (its own cred, delivery's, a $SYS cred)
// under names tmpfiles hands it. Only fs.protected_hardlinks=1 refuses the link; this checks the
// whole chain on this host.
Deno.test({
  name:
    `redteam19b T2 - hard links under tmpfiles' names do not hand the supervisor the signer's or root's creds${why}`,
  ignore: why !== "",
  async fn() {
    const h = await fakeHost();
    try {
      const A = h.spaceDir("alpha");
      const hardlinks = Number(
        (await Deno.readTextFile("/proc/sys/fs/protected_hardlinks")).trim(),
      );
      const tries = [
        `ln supervisor.creds agent.own.creds`,
        `ln delivery.creds manager.x.agents.json`,
        `ln connection-evictor.creds agents/sys.creds`,
        `ln ../auth/broker.json agent.seed.creds`,
      ];
      await h.sh(h.sup("alpha"), `cd ${A} && mkdir -p agents`);
      const made = [];
      for (const t of tries) {
        const r = await h.sh(h.sup("alpha"), `cd ${A} && ${t}`);
        if (r.code === 0) made.push(t);
      }
      await h.tmpfiles();
      const sig = h.users.get(UNIT_USERS.signer)!;
      assert.equal((await Deno.stat(`${h.R}/${A}/supervisor.creds`)).uid, sig);
      assert.equal((await Deno.stat(`${h.R}/${A}/delivery.creds`)).uid, sig);
      assert.equal((await Deno.stat(`${h.R}/${A}/connection-evictor.creds`)).uid, 0);
      assert.deepEqual(
        made,
        [],
        `protected_hardlinks=${hardlinks}: links made: ${made.join("; ")}`,
      );
    } finally {
      await h.close();
    }
  },
});
