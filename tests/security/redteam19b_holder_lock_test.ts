/**
 * Red team 19b, attack H: the shared run dir (`run/`, 1770 root:cotal, sticky) holds every
 * space's supervisor holder lock under a name anyone can compute (`manager.<sha256(root\0space)
 * [:16]>.lock`), and HolderLock.open opens it with O_CREAT and no O_NOFOLLOW/O_EXCL. Sticky only
 * stops a user removing or replacing a name another user already holds: a space whose
 * supervisor has not started yet (a space added later with `cotal space add` + `cotal systemd
 * install`) has no lock file, so another space's supervisor (group cotal) can take the name
 * first. run/ is not world-writable, so fs.protected_symlinks and fs.protected_regular (which
 * only cover world-writable sticky dirs at their systemd defaults) do not apply.
 */
import assert from "node:assert/strict";
import { fakeHost, why } from "./_redteam19b_root.ts";

const OPEN_LOCK = `
import { HolderLock } from "./lib/workspace/holder_lock.ts";
try {
  const l = await HolderLock.open(Deno.args[0]);
  console.log(JSON.stringify({ ok: true, held: l.held }));
  l.close();
} catch (err) {
  console.log(JSON.stringify({ ok: false, error: String(err?.code ?? err?.name ?? err) }));
}
`;

const PUT = `
import { FsSecretStore } from "./lib/workspace/fs_secret_store.ts";
await new FsSecretStore(Deno.args[0]).put(Deno.args[1], Deno.args[2]);
console.log(JSON.stringify({ ok: true }));
`;

// H1: alpha plants beta's (future) holder lock as a symlink to beta's roster. beta's supervisor
// follows it on every start: HolderLock truncates the file it opens and writes its own id, so
// beta's roster (its agents) is destroyed at each restart, by beta's own uid.
Deno.test({
  name:
    `redteam19b H1 - another space's supervisor cannot aim a space's holder lock at that space's roster${why}`,
  ignore: why !== "",
  async fn() {
    const h = await fakeHost();
    try {
      const beta = h.sup("beta");
      const lock = `${h.R}/run/manager.${h.instance("beta")}.lock`;
      const rosterKey = `space.${h.spaceDir("beta").slice("secrets/space.".length)}/manager.${
        h.instance("beta")
      }.agents.json`;
      const roster = `${h.R}/secrets/${rosterKey}`;
      // The attack, as alpha's supervisor uid: one symlink in the shared run dir.
      const plant = await h.sh(h.sup("alpha"), `ln -s '${roster}' '${lock}' && echo planted`);
      // beta's first start, then it records its agents, then it restarts.
      const first = await h.deno(beta, OPEN_LOCK, [lock]);
      const put = await h.deno(beta, PUT, [`${h.R}/secrets`, rosterKey, "ROSTER-OF-BETA"]);
      assert.equal(put.code, 0, put.err);
      const again = await h.deno(beta, OPEN_LOCK, [lock]);
      const text = await Deno.readTextFile(roster);
      const linked = (await Deno.lstat(lock)).isSymlink;
      console.log({
        plant: plant.out.trim(),
        first: first.out.trim(),
        again: again.out.trim(),
        roster: text.trim(),
        linked,
      });
      assert.equal(
        text,
        "ROSTER-OF-BETA",
        "beta's supervisor truncated its own roster through alpha's link",
      );
      assert.equal(
        linked,
        false,
        "beta's holder lock is a symlink alpha owns (alpha can re-aim it at any time)",
      );
    } finally {
      await h.close();
    }
  },
});

// H2: alpha takes the name as a plain file of its own, 0600: beta's supervisor cannot open its
// holder lock, Manager.start throws, and the unit fails (Restart=on-failure loops forever).
Deno.test({
  name:
    `redteam19b H2 - another space's supervisor cannot take a space's holder lock name first (supervisor DoS)${why}`,
  ignore: why !== "",
  async fn() {
    const h = await fakeHost();
    try {
      const lock = `${h.R}/run/manager.${h.instance("beta")}.lock`;
      const plant = await h.sh(h.sup("alpha"), `umask 077 && : > '${lock}' && echo planted`);
      const r = await h.deno(h.sup("beta"), OPEN_LOCK, [lock]);
      console.log({ plant: plant.out.trim(), open: r.out.trim() });
      assert.deepEqual(
        JSON.parse(r.out),
        { ok: true, held: true },
        "beta cannot take its own holder lock",
      );
    } finally {
      await h.close();
    }
  },
});

// H3 (control): once beta's lock exists, the sticky bit holds: alpha cannot remove, replace or
// read it, nor hold its flock.
Deno.test({
  name: `redteam19b H3 - an existing holder lock of another space stays out of reach${why}`,
  ignore: why !== "",
  async fn() {
    const h = await fakeHost();
    try {
      const lock = `${h.R}/run/manager.${h.instance("beta")}.lock`;
      const r = await h.deno(h.sup("beta"), OPEN_LOCK, [lock]);
      assert.deepEqual(JSON.parse(r.out), { ok: true, held: true });
      for (
        const s of [
          `rm -f '${lock}'`,
          `mv -f '${lock}' '${lock}.x'`,
          `ln -sf /etc/passwd '${lock}'`,
          `cat '${lock}'`,
          `flock -n '${lock}' true`,
        ]
      ) {
        const a = await h.sh(h.sup("alpha"), s);
        assert.notEqual(a.code, 0, `alpha: ${s} succeeded`);
      }
    } finally {
      await h.close();
    }
  },
});
