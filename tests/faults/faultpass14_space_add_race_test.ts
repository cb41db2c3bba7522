/**
 * Fault pass 14: two `cotal space add <name>` of the same new space, started at the same instant
 * on one running detached stack (two operators, or a script run twice), three times (spaces
 * three, four, five). Found, by hand, three outcomes in three tries:
 * - three: one add "added space 'three'" (exit 0), the other "cotal-delivery did not start
 *   within 10 s; see its log." (exit 1); 15 s on, and for as long as watched (over 35 s), `space
 *   list` and status say "delivery.three not running (pid N is gone)" and status exits 1
 *   ("restart what is not running: cotal up") while a delivery of three runs and holds its
 *   lock: both starts share `<pid file>.stat`, so the loser read the winner's stat line and
 *   wrote its own (dead) wrapper's pid into the pid file. The watchdog sees the lock held and
 *   does nothing; a later `space rm three` stops "3 daemon(s)" and leaves that delivery running.
 * - four: both exit 0 (one says it "completed space 'four', which an interrupted add or
 *   restore had left"); whole.
 * - five: both exit 1 ("cotal-delivery is already running (its lock is held); stop it first."
 *   and "cotal-delivery exited at once (exit code 0)"), the space rolled back: neither operator
 *   got it. In an earlier try one of the two died on an uncaught error (a stack trace through
 *   lib/cli/dispatch.ts) and the other said "Could not write the default delivery class of
 *   three (503)".
 *
 * In this test (three runs: one passed, two failed):
 * - "five: not listed, 1 of its processes running (A exit 1: cotal-delivery did not start
 *   within 10 s; B exit 0: completed space 'five', which an interrupted add or restore had
 *   left without all of its daemons: they run, and the watchdog heals them)": the add that
 *   succeeded was undone by the other's rollback, and a daemon of the removed space is left;
 * - "five: not listed, 0 of its processes running (A exit 1: cotal-delivery is already running
 *   (its lock is held); stop it first.; B exit 0: added space 'five': agents, messages, tasks
 *   and durable delivery work now ...)": an add acknowledged with exit 0 is lost, rolled back by
 *   the add that lost the race (removeSpace in spaceAdd's catch removes what the other made).
 * Not deterministic (a race): it fails in most runs, not all.
 *
 * Expected, each time: within 15 s of both ending, the space is either not listed with none of
 * its processes left, or listed with every daemon running (by `space list`) and watched; and an
 * add that exited 0 left it so.
 */
import assert from "node:assert/strict";
import { spaceKeyHex } from "../../lib/workspace/keys.ts";
import {
  cotalRun,
  fp14Root,
  holdsWithin,
  processesMentioning,
  spaceRows,
  upDetached,
  watchedIds,
} from "./_fp14.ts";

Deno.test({
  name:
    "fault pass 14 - two space adds of one new space at once: the space ends whole or absent, never half",
  async fn() {
    const r = await fp14Root("sar");
    const short = (t: string) =>
      t.replace(new RegExp(String.fromCharCode(27) + "\\[[0-9;]*m", "g"), "").trim().split("\n")
        .filter((l) => !/^\s+at /.test(l))
        .slice(0, 2).join(" | ").slice(0, 200);
    const bad: string[] = [];
    try {
      await upDetached(r);
      for (const space of ["three", "four", "five"]) {
        const key = spaceKeyHex(space);
        const [a, b] = await Promise.all([
          cotalRun(r.root, ["space", "add", space], 60_000),
          cotalRun(r.root, ["space", "add", space], 60_000),
        ]);
        const said = `A exit ${a.code}: ${short(a.text)}; B exit ${b.code}: ${short(b.text)}`;
        let seen = "";
        const whole = await holdsWithin(
          async () => {
            const rows = await spaceRows(r.root);
            if (!rows) return false;
            const row = rows.find((s) => s.space === space);
            const live = processesMentioning(`space.${key}`).filter((p) => {
              try {
                return Deno.readTextFileSync(`/proc/${p}/cmdline`).includes(r.root);
              } catch {
                return false;
              }
            });
            const watched = watchedIds(r.root).filter((id) => id.endsWith(`.${key}`));
            seen = row
              ? `listed, daemons [${
                row.daemons.map((d) => `${d.id.split(".")[0]}:${d.state}`)
              }], ${watched.length} watched`
              : `not listed, ${live.length} of its processes running`;
            if (!row) return live.length === 0 && a.code !== 0 && b.code !== 0;
            return ["delivery", "signer", "supervise"].every((d) =>
              row.daemons.some((x) => x.id.startsWith(`${d}.`) && x.state === "running") &&
              watched.some((id) => id.startsWith(`${d}.`))
            );
          },
          15_000,
          1_500,
        );
        if (!whole) bad.push(`${space}: ${seen} (${said})`);
      }
      assert.deepEqual(
        bad,
        [],
        `two racing adds left a space half made, 15 s after both ended:\n${bad.join("\n")}`,
      );
    } finally {
      await r.cleanup();
    }
  },
});
